"""A killed Spark driver's scratch directory is removed by the next driver's start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs import scratch


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)


def test_start_removes_dead_drivers_of_this_host_only(tmp_path: Path) -> None:
    host = socket.gethostname()
    dead = tmp_path / f"driver-{host}-{dead_pid()}"
    (dead / "spark-1" / "blockmgr-2").mkdir(parents=True)
    alive = tmp_path / f"driver-{host}-{os.getppid()}"
    alive.mkdir()
    other_host = tmp_path / "driver-elsewhere-1"
    other_host.mkdir()

    removed = scratch.remove_stale(tmp_path)

    assert removed == [dead]
    assert not dead.exists()
    assert alive.exists() and other_host.exists()


def test_claim_gives_this_process_its_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scratch, "_claimed", [])
    monkeypatch.setenv(scratch.ROOT_ENV, str(tmp_path / "root"))

    run = scratch.claim_scratch()

    assert run == tmp_path / "root" / f"driver-{socket.gethostname()}-{os.getpid()}"
    assert run.is_dir()
    assert scratch.claim_scratch() == run  # once per process


def test_root_follows_spark_local_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(scratch.ROOT_ENV, raising=False)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path}/a,{tmp_path}/b")
    assert scratch.scratch_root() == tmp_path / "a" / "eos-bridge-spark"
