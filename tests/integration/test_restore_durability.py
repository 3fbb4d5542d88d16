"""Restore writes skip the WAL: a crash mid-restore must never leave an offset without its data.

A child process restores into a store and dies with ``os._exit`` (no close, no flush: what a
SIGKILL or OOM kill leaves); the test then reopens the store and checks what survived.
Integration tier: the crashing process is the point (two ~24 MB restores, seconds each).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.state.store import StorePartition

pytestmark = pytest.mark.integration

BATCHES, RECORDS, VALUE = 60, 2000, b"v" * 200  # ~24 MB: several 4 MB memtables flush


def key(batch: int, record: int) -> bytes:
    return b"%04d-%05d" % (batch, record)


CHILD = f"""
import os, sys
from pathlib import Path
from app.state.store import StorePartition
store = StorePartition(Path(sys.argv[1]), "store 'count' of in[0]")
for i in range({BATCHES}):
    batch = store.changelog_batch()
    for j in range({RECORDS}):
        batch.put(b"%04d-%05d" % (i, j), {VALUE!r})
    store.apply_changelog(batch, [], i)  # batch i holds changelog offset i
if sys.argv[2] == "finish":
    store.finish_restore()
os._exit(0)  # a crash: memtables are lost
"""


def crash_mid_restore(path: Path, finish: bool) -> StorePartition:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run(
        [sys.executable, "-c", CHILD, str(path), "finish" if finish else "crash"],
        check=True, env=env, timeout=120,
    )  # fmt: skip
    return StorePartition(path, "store 'count' of in[0]")


def batches_present(store: StorePartition) -> list[int]:
    """How many records of each batch the store holds."""
    return [len(store.scan(key(i, 0), key(i + 1, 0))) for i in range(BATCHES)]


def test_a_crash_mid_restore_keeps_a_prefix_of_whole_batches_with_its_offset(
    tmp_path: Path,
) -> None:
    store = crash_mid_restore(tmp_path / "db", finish=False)
    try:
        offset = store.changelog_offset()
        assert offset is not None, "memtables flushed during the restore carry the offset along"
        assert offset < BATCHES - 1, "the crash lost the unflushed tail (else nothing is tested)"
        expected = [RECORDS] * (offset + 1) + [0] * (BATCHES - offset - 1)
        assert batches_present(store) == expected, "data and offset from the same batches"
    finally:
        store.close()


def test_a_finished_restore_is_durable(tmp_path: Path) -> None:
    store = crash_mid_restore(tmp_path / "db", finish=True)
    try:
        assert store.changelog_offset() == BATCHES - 1
        assert batches_present(store) == [RECORDS] * BATCHES
    finally:
        store.close()
