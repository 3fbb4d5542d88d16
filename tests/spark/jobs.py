"""Running a job as its own process, as a scheduler would, and making sure it is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from devkit.kafka.cluster import die_with_parent

REPO = Path(__file__).resolve().parents[2]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def run_module(
    module: str, args: Sequence[str], env: Mapping[str, str], log: Path, timeout: float
) -> int:
    """Run ``python -m module args`` in its own process group; return its exit code."""
    return run_command([sys.executable, "-m", module, *args], env, log, timeout)


def run_command(argv: Sequence[str], env: Mapping[str, str], log: Path, timeout: float) -> int:
    """Run argv in its own process group, output to log; return its exit code.

    The group holds the job's JVM and Python processes (whichever starts the other). After the
    main process ends, the rest notice their closed pipes and exit; we wait for that, with a
    deadline, and only then SIGKILL whatever of our group is left.
    """
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(argv),
            cwd=REPO,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # a killed pytest leaves no Spark JVM behind
        )
        try:
            code = proc.wait(timeout=timeout)
        finally:
            deadline = time.monotonic() + 30
            while _group_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _group_alive(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return code


def tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
