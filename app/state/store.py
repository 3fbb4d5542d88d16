"""One RocksDB database per (store, input topic partition), opened with ``rocksdict``.

The database holds the committed state only: the processing loop's uncommitted updates live in
the write-behind cache (:mod:`app.state.cache`) until their checkpoint commits. Every write is
one ``WriteBatch`` that carries the data *and* the changelog offset it corresponds to, so the
two can never disagree after a crash.

Column families other than ``default`` appear when a changelog written by Quix Streams is
restored (its records name their column family); the changelog offset lives in
``__metadata__`` under Quix's key, so an operator can read it the same way.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import struct
import weakref
from pathlib import Path
from typing import Any

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from app.errors import StateCorrupted
from app.ops.resources import register_memory_source

log = logging.getLogger(__name__)

METADATA_CF = "__metadata__"
CHANGELOG_OFFSET_KEY = b"__changelog_offset__"
_OFFSET = struct.Struct(">q")
DEFAULT_CF_NAME = b"default"

# Shared by every database of the process: memory stays bounded however many partitions open.
_BLOCK_CACHE_BYTES = 64 * 1024 * 1024
_MEMTABLES_BYTES = 128 * 1024 * 1024
_shared: dict[str, Any] = {}
# Restore writes skip the write-ahead log (see StorePartition.apply_changelog for why it is safe).
_NO_WAL = WriteOptions()
_NO_WAL.disable_wal = True  # type: ignore[method-assign,assignment]  # a property at run time


def set_block_cache(capacity: int) -> None:
    """Size the block cache every database of the process shares (``state_block_cache_bytes``):
    RocksDB fills it to this cap as a long-running bridge reads and compacts, so it is part
    of the memory to budget for, whatever the state's size."""
    _shared["cache_bytes"] = capacity
    if "cache" in _shared:
        _shared["cache"].set_capacity(capacity)


def _options() -> Options:
    if "cache" not in _shared:
        _shared["cache"] = Cache(_shared.get("cache_bytes", _BLOCK_CACHE_BYTES))
        _shared["wbm"] = WriteBufferManager(_MEMTABLES_BYTES, False)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.create_missing_column_families(True)
    # Small memtables: writes into a large one get slower as it fills (measured, not modelled);
    # at 16 MB the checkpoint's write cost doubled between 1M and 4M records (bench.state_cost).
    opts.set_write_buffer_size(4 * 1024 * 1024)
    opts.set_max_write_buffer_number(3)
    opts.set_write_buffer_manager(_shared["wbm"])
    table = BlockBasedOptions()
    table.set_block_cache(_shared["cache"])
    opts.set_block_based_table_factory(table)
    opts.set_max_background_jobs(2)
    # Every flush cuts all column families at one point: data and changelog offset stay
    # consistent on disk even for writes that skipped the WAL (restore).
    opts.set_atomic_flush(True)
    return opts


_open_stores: weakref.WeakSet[StorePartition] = weakref.WeakSet()


def _memory() -> dict[str, int]:
    """The shared block cache and memtables, and each open database's table readers."""
    if "cache" not in _shared:
        return {}
    readers = 0
    for store in list(_open_stores):
        db = store._db
        # closed meanwhile: rocksdict raises plain Exception
        with contextlib.suppress(Exception):
            readers += int(db.property_int_value("rocksdb.estimate-table-readers-mem") or 0)
    return {
        "block_cache": _shared["cache"].get_usage(),
        "memtables": _shared["wbm"].get_usage(),
        "table_readers": readers,
    }


register_memory_source(_memory)


class StorePartition:
    """The committed state of one store for one input partition.

    Args:
        path: the database directory (created when missing).
        where: a human name for errors, e.g. ``store 'count' of orders[3]``.
    """

    def __init__(self, path: Path, where: str) -> None:
        self.path = path
        self.where = where
        self._db: Any = None
        self._cfs: dict[bytes, Any] = {}
        try:
            self._open()
        except StateCorrupted as exc:
            if "lock" in str(exc).lower():
                raise  # another holder: never delete what someone else has open
            # Corrupt or unreadable: the changelog has everything; start over from it.
            log.warning("%s; wiping it, the changelog restores it", exc)
            shutil.rmtree(self.path, ignore_errors=True)
            self._open()

    def _open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        opts = _options()
        try:
            existing = Rdict.list_cf(str(self.path), opts) if _exists(self.path) else []
            families = {name: _options() for name in existing if name != "default"}
            families.setdefault(METADATA_CF, _options())
            self._db = Rdict(str(self.path), opts, column_families=families)
        except Exception as exc:  # rocksdict raises plain Exception for I/O and corruption
            raise StateCorrupted(
                f"{self.where}: cannot open RocksDB at {self.path}: {exc}"
            ) from exc
        self._cfs = {b"default": None}
        _open_stores.add(self)
        self._meta = self._db.get_column_family_handle(METADATA_CF)
        self._meta_view = self._db.get_column_family(METADATA_CF)

    # ---- reads -----------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def scan(self, lower: bytes, upper: bytes) -> list[tuple[bytes, bytes]]:
        """Committed entries with ``lower <= key < upper``, in key order."""
        out: list[tuple[bytes, bytes]] = []
        it = self._db.iter()
        it.seek(lower)
        while it.valid():
            key = it.key()
            if key >= upper:
                break
            out.append((key, it.value()))
            it.next()
        return out

    def changelog_offset(self) -> int | None:
        """Offset of the last changelog record this database reflects (None: nothing yet)."""
        raw = self._meta_view.get(CHANGELOG_OFFSET_KEY)
        return None if raw is None else int(_OFFSET.unpack(raw)[0])

    # ---- writes: one WriteBatch each -------------------------------------------------------

    def write(self, updates: dict[bytes, bytes | None], changelog_offset: int) -> None:
        """Checkpoint step 5: committed updates (None = delete) plus the changelog offset."""
        batch = WriteBatch(raw_mode=True)
        for key, value in updates.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        batch.put(CHANGELOG_OFFSET_KEY, _OFFSET.pack(changelog_offset), self._meta)
        self._write(batch)

    def changelog_batch(self) -> Any:
        """Recovery: an empty WriteBatch the restore loop fills with default-CF records."""
        return WriteBatch(raw_mode=True)

    def apply_changelog(
        self, batch: Any, others: list[tuple[bytes, bytes, bytes | None]], last_offset: int
    ) -> None:
        """Recovery: restored records of other column families (column family, key, value)
        join ``batch`` with the changelog offset; one atomic write, without the WAL.

        Why a crash cannot leave the offset ahead of the data: the batch carries both, and
        with no WAL only flushed memtables survive a crash; ``atomic_flush`` makes every
        flush cut all column families after the same batch, so what survives is always a
        prefix of the restore batches. :meth:`finish_restore` makes it all durable before any
        WAL-logged checkpoint write can follow.
        """
        for cf, key, value in others:
            if value is None:
                batch.delete(key, self._family(cf))
            else:
                batch.put(key, value, self._family(cf))
        batch.put(CHANGELOG_OFFSET_KEY, _OFFSET.pack(last_offset), self._meta)
        self._write(batch, _NO_WAL)

    def finish_restore(self) -> None:
        """Recovery done: flush what the restore wrote without the WAL, before the partition
        opens for processing (whose checkpoint writes go through the WAL).

        The data column families are flushed before ``__metadata__``, each waited for: a crash
        in between leaves data ahead of the stored offset (replayed again, idempotently), never
        an offset ahead of its data.
        """
        try:
            self._db.flush(True)
            for handle_cf in [cf for cf in self._cfs if cf != DEFAULT_CF_NAME]:
                self._db.get_column_family(handle_cf.decode()).flush(True)
            self._meta_view.flush(True)
        except Exception as exc:  # rocksdict raises plain Exception for I/O errors
            raise StateCorrupted(
                f"{self.where}: RocksDB flush after restore failed at {self.path}: {exc}"
            ) from exc

    def _family(self, cf: bytes) -> Any:
        handle = self._cfs.get(cf)
        if handle is None:
            name = cf.decode()
            if name not in Rdict.list_cf(str(self.path), _options()):
                self._db.create_column_family(name, _options())
            handle = self._cfs[cf] = self._db.get_column_family_handle(name)
        return handle

    def _write(self, batch: Any, options: WriteOptions | None = None) -> None:
        try:
            self._db.write(batch, options)
        except Exception as exc:
            raise StateCorrupted(
                f"{self.where}: RocksDB write failed at {self.path}: {exc}"
            ) from exc

    # ---- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if self._db is not None:
            # Column family handles and views keep the database (and its LOCK) alive.
            self._meta = self._meta_view = None
            self._cfs = {}
            self._db.close()
            self._db = None

    def wipe(self) -> None:
        """Delete this database (its state is rebuilt from the changelog) and reopen it empty."""
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        log.warning(
            "%s: local state wiped at %s; restoring from the changelog", self.where, self.path
        )
        self._open()


def _exists(path: Path) -> bool:
    return (path / "CURRENT").exists()
