"""Run the bridge as a real subprocess (``python -m app run``), as users do; with ``faults``,
through the test rig's launcher (``python -m tests.support.faulty_bridge``), which composes
the same bridge with the test's faults."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from devkit.kafka.cluster import die_with_parent
from tests.support.cli import HERMETIC
from tests.support.kafka import KafkaFixture, wait_until

REPO = Path(__file__).resolve().parents[2]


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class BridgeProcess:
    """One bridge instance; ``env`` entries become BRIDGE_* settings.

    ``command``, ``pythonpath`` and ``cwd`` say which code runs (the working tree by default;
    the rolling upgrade test points them at an earlier version's wheel). ``faults``: the
    launcher's options without their dashes, e.g. ``{"abort_every": 3}``.
    """

    def __init__(
        self,
        log_dir: Path,
        name: str = "bridge",
        faults: Mapping[str, object] | None = None,
        **settings: Any,
    ) -> None:
        self.log_path = log_dir / f"{name}.log"
        # EOS_BRIDGE_TEST_SETTINGS='{"pipelined_commit": true}': a whole suite with a setting
        # on (a test's own settings win)
        extra = orjson.loads(os.environ.get("EOS_BRIDGE_TEST_SETTINGS") or "{}")
        self.settings = {"http_port": 0, "log_level": "INFO", **extra, **settings}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.command = [sys.executable, "-m", "app", "run"]
        if faults:
            self.command = [sys.executable, "-m", "tests.support.faulty_bridge", *_flags(faults)]
        self.pythonpath = str(REPO)
        self.cwd = REPO

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(HERMETIC)}
        for key, value in self.settings.items():
            if isinstance(value, list | dict):
                value = orjson.dumps(value).decode()
            env[f"BRIDGE_{key.upper()}"] = str(value)
        env["PYTHONPATH"] = self.pythonpath
        return env

    def start(self) -> BridgeProcess:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts} =====\n".encode())
            self.proc = subprocess.Popen(
                self.command,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                # PDEATHSIG follows the starting *thread*: only the main thread lives as long
                # as the test run, so bridges started from helper threads are not tied.
                preexec_fn=die_with_parent if _on_main_thread() else None,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no final checkpoint, an open transaction left behind."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM and wait for the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Test teardown: make sure nothing is left running."""
        if self.running():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(30)


def _flags(faults: Mapping[str, object]) -> list[str]:
    """Launcher options: ``{"abort_every": 3, "shared_transactional_id": True}`` →
    ``--abort-every 3 --shared-transactional-id``."""
    flags: list[str] = []
    for name, value in faults.items():
        flags.append("--" + name.replace("_", "-"))
        if value is not True:
            flags.append(str(value))
    return flags


def wait_caught_up(
    kafka: KafkaFixture,
    group: str,
    topic: str,
    timeout: float,
    bridges: list[BridgeProcess] | tuple[BridgeProcess, ...] = (),
) -> None:
    """Wait until ``group`` has committed the end offset of every partition of ``topic``, and
    then of its repartition topics (``<group>-…-repartition``: a regrouped pipeline's outputs
    come from those)."""
    ends = kafka.end_offsets(topic)

    def done(name: str, ends: dict[int, int]) -> bool:
        committed = kafka.committed_offsets(group, name)
        return all(end == 0 or committed.get(p, -1) >= end for p, end in ends.items())

    def caught_up() -> bool:
        for b in bridges:
            if b.proc is not None and not b.running():
                raise AssertionError(f"bridge exited with {b.proc.returncode}:\n{b.logs()[-4000:]}")
        if not done(topic, ends):
            return False
        hops = [t for t in kafka.topic_names() if t.startswith(f"{group}-")]
        return all(done(t, kafka.end_offsets(t)) for t in hops if t.endswith("-repartition"))

    wait_until(caught_up, timeout, f"group {group} to commit {ends} on {topic}", step=0.5)


def json_records(n: int, start: int = 0, keys: int = 100) -> tuple[list[bytes], list[bytes]]:
    """``n`` JSON values with unique ids and their keys."""
    values, keys_out = [], []
    for i in range(start, start + n):
        key = f"user-{i % keys}"
        values.append(
            orjson.dumps({"id": f"r{i}", "key": key, "amount": i % 97, "ts": 1_700_000_000_000 + i})
        )
        keys_out.append(key.encode())
    return values, keys_out


def bridge_topics(kafka: KafkaFixture, partitions: int = 4) -> tuple[str, str, str]:
    """Fresh input, output (same partition count) and single-partition dead-letter topics."""
    src = kafka.create_topic(kafka.unique("in"), partitions)
    out = kafka.create_topic(kafka.unique("out"), partitions)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    return src, out, dlq


def base_settings(
    kafka: KafkaFixture, src: str, out: str, dlq: str, **extra: object
) -> dict[str, Any]:
    """The settings every end-to-end test starts from (unique group, instance ``i0``)."""
    return {
        "bootstrap_servers": kafka.bootstrap,
        "input_topics": [src],
        "output_topic": out,
        "dlq_topic": dlq,
        "group_id": kafka.unique("g"),
        "instance_id": "i0",
        "commit_interval": 0.5,
        **extra,
    }


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of a GET on the bridge's HTTP port (0 and "" when nothing answers)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` in a Prometheus text exposition whose labels include
    ``labels`` (every sample when none are given)."""
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        ours = line.startswith(name + " ") or line.startswith(name + "{")
        if ours and all(w in line for w in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


def metrics_when(port: int, ready: Callable[[str], bool], what: str, timeout: float = 60) -> str:
    """The bridge's /metrics text once ``ready(text)`` holds.

    A checkpoint's counters (checkpoints, dead letters by class) and the lag gauge are updated
    just *after* its commit, which the test may see first: a scrape right after
    :func:`wait_caught_up` can come before them, so the test waits for them instead.
    """
    scraped = [""]

    def scrape() -> bool:
        scraped[0] = http_get(port, "/metrics")[1]
        return ready(scraped[0])

    wait_until(scrape, timeout, what)
    return scraped[0]
