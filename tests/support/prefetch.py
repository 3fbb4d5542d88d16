"""Tool builds in the background while a full run's first tests wait on brokers.

A fresh machine builds helm, kube-score, Toxiproxy, promtool and checkov the first time a test
asks for one (``tools/*.sh --path``), each a few minutes of Go builds or pip installs on the
critical path. When the collected run holds tests that need them, ``tools/prefetch.sh`` starts
at collection and builds them beside the tests (the tools' own locks make a test that gets
there first wait for the build in progress); the session's end stops it by its own pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_NEEDS_TOOLS = ("chart", "image", "chaos")  # markers of tests that call tools/*.sh
_OFF = "EOS_BRIDGE_NO_PREFETCH"  # set to 1 to build each tool only when a test asks


def wanted(items: list[pytest.Item]) -> bool:
    """Whether the run holds a test that needs a pinned tool."""
    if os.environ.get(_OFF) == "1":
        return False
    return any(item.get_closest_marker(m) for item in items for m in _NEEDS_TOOLS)


def start(log: Path) -> subprocess.Popen[bytes]:
    """``tools/prefetch.sh`` at low priority, in its own process group, output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            ["nice", "-n", "10", str(REPO / "tools" / "prefetch.sh")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End the prefetch and the builds it started (its process group, by its pid)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
