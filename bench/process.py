"""One contender process: start it, sample its CPU and peak RSS, stop it by its own pid; and
the settling of the machine before each run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from bench.contenders import Contender, Job


class ContenderProcess:
    """A running contender; its output goes to ``log_path``."""

    def __init__(
        self, contender: Contender, job: Job, log_path: Path, python_args: tuple[str, ...] = ()
    ) -> None:
        argv, env = contender.command(job)
        argv = [argv[0], *python_args, *argv[1:]]  # e.g. ("-m", "pyinstrument", ...)
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=job.source
            )
        self._ps = psutil.Process(self.proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU seconds so far."""
        times = self._ps.cpu_times()
        return float(times.user + times.system)

    def peak_rss_mb(self) -> float:
        """VmHWM: the largest resident set the process has had."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float(self._ps.memory_info().rss) / 2**20

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (clean stop), SIGKILL after ``timeout``; returns the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(30)

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def settle(
    broker_pid: int, idle_share: float = 0.05, window_s: float = 1.0, timeout_s: float = 30.0
) -> float:
    """Before a run: write back dirty pages, then wait until the broker uses less than
    ``idle_share`` of a core over ``window_s`` (at most ``timeout_s``); returns the seconds it
    took.

    Otherwise the kernel writes the previous run's output back during the next run, and the
    broker deletes the previous run's topics and logs its changelog compaction in it: work
    that lands on whichever contender runs next, not on the one that caused it.
    """
    started = time.monotonic()
    os.sync()
    broker = psutil.Process(broker_pid)
    while time.monotonic() - started < timeout_s:
        before = broker.cpu_times()
        time.sleep(window_s)
        after = broker.cpu_times()
        used = after.user + after.system - before.user - before.system
        if used < idle_share * window_s:
            break
    return time.monotonic() - started
