"""Scratch space of a job's driver: one directory per driver, gone after the job.

Spark writes its ``spark-*``/``blockmgr-*`` directories under ``spark.local.dir`` (or
``SPARK_LOCAL_DIRS``) and the JVM unpacks native libraries into ``java.io.tmpdir``; a driver
killed with SIGKILL never removes them. Every driver therefore works in
``<root>/driver-<host>-<pid>``, removes it at exit, and at start removes the directories of
earlier drivers of the same host whose process is gone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
from pathlib import Path

ROOT_ENV = "EOS_SPARK_SCRATCH_DIR"
_claimed: list[Path] = []


def scratch_root() -> Path:
    """``$EOS_SPARK_SCRATCH_DIR``, else ``eos-bridge-spark`` in the first ``SPARK_LOCAL_DIRS``
    entry or the temp directory."""
    explicit = os.environ.get(ROOT_ENV)
    if explicit:
        return Path(explicit)
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    return Path(local_dirs or tempfile.gettempdir()) / "eos-bridge-spark"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale(root: Path, host: str | None = None) -> list[Path]:
    """Remove the driver directories of ``host`` (default: this one) whose process is gone.

    Directories of other hosts are left alone: a shared volume may serve several machines, and
    their process ids mean nothing here.
    """
    prefix = f"driver-{host or socket.gethostname()}-"
    removed = []
    for path in root.glob(f"{prefix}*"):
        pid = path.name.removeprefix(prefix)
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def claim_scratch(root: Path | None = None) -> Path:
    """This driver's scratch directory (created once per process, removed at exit)."""
    if _claimed:
        return _claimed[0]
    base = root or scratch_root()
    base.mkdir(parents=True, exist_ok=True)
    remove_stale(base)
    run = base / f"driver-{socket.gethostname()}-{os.getpid()}"
    shutil.rmtree(run, ignore_errors=True)  # a dead driver that had our pid
    run.mkdir()
    atexit.register(shutil.rmtree, run, True)
    _claimed.append(run)
    return run
