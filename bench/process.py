"""One contender process: start it, sample its CPU and peak RSS, stop it by its own pid."""

from __future__ import annotations

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
