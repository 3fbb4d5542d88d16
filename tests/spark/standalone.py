"""A real Spark standalone cluster on loopback: one master and two workers.

Started from the pyspark distribution's own launcher (``bin/spark-class``; the pip package
ships no ``sbin/start-master.sh``), each daemon in the foreground as a process of ours, so it is
stopped by its own pid. Readiness is the master's JSON status page listing every worker ALIVE.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyspark

from devkit.kafka.cluster import die_with_parent

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"

# Sized for a 2-core CI box: each worker offers one core, so the two executors together use
# both; the memory covers one small executor (Spark refuses executors below ~450 MiB).
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
DAEMON_MEMORY = "256m"


def free_port() -> int:
    """A port that was free a moment ago (the daemon binds it right after)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass(slots=True)
class Daemon:
    """One daemon process (master or worker) and its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    _out: IO[bytes]

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (a worker then kills its executors), SIGKILL after ``timeout``; the
        process group catches an executor JVM its worker left behind."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._out.close()


@dataclass(slots=True)
class StandaloneCluster:
    """Master URL, status page and work directories of a running cluster."""

    root: Path
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def worker_dir(self, index: int) -> Path:
        return self.root / f"worker-{index}"

    def job_conf(self) -> dict[str, str]:
        """Spark settings a driver on this machine needs to use the cluster."""
        return {
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.cores.max": str(2 * WORKER_CORES),
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.ui.enabled": "false",
        }

    def status(self) -> dict[str, Any]:
        """The master's status page as JSON (workers, applications)."""
        url = f"http://{HOST}:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except (OSError, urllib.error.URLError, ValueError):
            return 0
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def start(self, workers: int = 2, timeout: float = 180) -> None:
        """Start the master and ``workers`` workers; return once all are ALIVE."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "master",
            [MASTER_CLASS, "--host", HOST, "--port", str(self.port)],
            ["--webui-port", str(self.ui_port)],
        )
        for index in range(workers):
            work = self.worker_dir(index)
            work.mkdir()
            self._spawn(
                f"worker-{index}",
                [WORKER_CLASS, "--host", HOST, "--cores", str(WORKER_CORES)],
                ["--memory", WORKER_MEMORY, "--work-dir", str(work), "--webui-port", "0"],
                self.master_url,
            )
        self._wait(lambda: self.alive_workers() == workers, timeout, f"{workers} ALIVE workers")

    def _spawn(self, name: str, head: list[str], tail: list[str], *extra: str) -> None:
        log = self.root / f"{name}.log"
        out = log.open("wb")
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_WORKER_CORES": str(WORKER_CORES),
            "SPARK_LOCAL_IP": HOST,
            # Executors and scratch files of this cluster stay under the test's directory.
            "SPARK_LOCAL_DIRS": str(self.root / "local"),
        }
        proc = subprocess.Popen(
            [str(SPARK_CLASS), *head, *tail, *extra],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # a killed pytest leaves no Spark JVM behind
        )
        self.daemons.append(Daemon(name, proc, log, out))

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [d.name for d in self.daemons if d.proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {d.log}\n{_tail(d.log)}" for d in self.daemons)
                problem = f"{dead} exited" if dead else f"no {what} after {timeout:.0f} s"
                raise RuntimeError(f"Spark standalone cluster: {problem}\n{logs}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Workers first (they stop their executors), then the master."""
        for daemon in reversed(self.daemons):
            daemon.stop()
        self.daemons.clear()

    def executor_apps(self, index: int) -> set[str]:
        """Ids of the applications that ran an executor on worker ``index``."""
        return {p.name for p in self.worker_dir(index).glob("app-*") if any(p.iterdir())}


def _tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
