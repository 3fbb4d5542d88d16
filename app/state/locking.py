"""One bridge process per state directory: an advisory lock next to the databases.

RocksDB locks each database, but only while it is open; this lock also covers the gaps (no
partition open yet, ``reset-state`` run against a live instance's directory).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from app.errors import ConfigError


class StateDirLock:
    """An exclusive ``flock`` on ``<root>/.lock`` held for the life of the process."""

    def __init__(self, root: Path, setting: str = "state_dir (BRIDGE_STATE_DIR)") -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / ".lock"
        self._file: IO[str] | None = open(self.path, "a+")  # noqa: SIM115 - held until release
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "another process"
            self._file.close()
            self._file = None
            raise ConfigError(
                f"{setting}: {root} is in use by {holder}; each bridge instance needs its own "
                f"state directory (stop the other process first)"
            ) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"pid {os.getpid()}\n")
        self._file.flush()

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None
