"""The write-behind cache: uncommitted updates of one store partition, capped in bytes.

Steps read and write through :class:`PartitionState`. Writes stay in memory until the checkpoint
commits (then they become one RocksDB WriteBatch) or aborts (then they are dropped), so RocksDB
only ever holds committed state. The byte cap is shared by every partition of the process:
reaching it makes the loop checkpoint early instead of growing without bound.

Committed values also stay in memory after their checkpoint (a read cache with its own cap):
a key updated in one checkpoint is usually read again in the next, and a dict lookup costs a
fraction of a RocksDB ``get``. The read cache only ever holds what RocksDB
holds, so dropping it (cap reached, abort, close) never changes an answer.
"""

from __future__ import annotations

from typing import Any

from app.state.store import StorePartition

# Rough per-entry overhead of a dict slot plus two bytes objects in CPython.
ENTRY_OVERHEAD = 120
_MISSING: Any = object()


class CacheBudget:
    """Bytes held by every write-behind cache of the process, against one cap."""

    __slots__ = ("cap", "used")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0

    @property
    def full(self) -> bool:
        return self.used >= self.cap


class PartitionState:
    """State of one store for one input partition: committed RocksDB + uncommitted updates.

    ``memo`` is scratch space for steps (e.g. "windows closed up to"), cleared whenever the
    uncommitted updates are, so it can never describe updates that were rolled back.
    """

    __slots__ = (
        "budget",
        "changelog",
        "clean",
        "clean_nbytes",
        "dirty",
        "memo",
        "nbytes",
        "partition",
        "reads",
        "store",
    )

    def __init__(
        self,
        store: StorePartition,
        changelog: str,
        partition: int,
        budget: CacheBudget,
        reads: CacheBudget | None = None,
    ) -> None:
        self.store = store
        self.changelog = changelog
        self.partition = partition
        self.budget = budget
        self.reads = reads  # None: no read cache
        self.dirty: dict[bytes, bytes | None] = {}
        self.nbytes = 0
        self.clean: dict[bytes, bytes | None] = {}  # committed values (None = deleted)
        self.clean_nbytes = 0
        self.memo: dict[str, Any] = {}

    def get(self, key: bytes) -> bytes | None:
        dirty = self.dirty
        if key in dirty:
            return dirty[key]
        clean = self.clean
        if key in clean:
            return clean[key]
        return self.store.get(key)

    def set(self, key: bytes, value: bytes) -> None:
        dirty = self.dirty
        old = dirty.get(key, _MISSING)
        if old is _MISSING:
            delta = len(key) + ENTRY_OVERHEAD + len(value)
        else:
            delta = len(value) - (0 if old is None else len(old))
        dirty[key] = value
        self.nbytes += delta
        self.budget.used += delta

    def delete(self, key: bytes) -> None:
        dirty = self.dirty
        old = dirty.get(key, _MISSING)
        delta = len(key) + ENTRY_OVERHEAD if old is _MISSING else -(0 if old is None else len(old))
        dirty[key] = None
        self.nbytes += delta
        self.budget.used += delta

    def scan(self, lower: bytes, upper: bytes) -> list[tuple[bytes, bytes]]:
        """Entries with ``lower <= key < upper`` in key order, uncommitted updates included."""
        merged = dict(self.store.scan(lower, upper))
        for key, value in self.dirty.items():
            if lower <= key < upper:
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        return sorted(merged.items())

    def committed(self) -> None:
        """The updates are in RocksDB now: they move to the read cache (``memo`` stays valid)."""
        reads = self.reads
        if reads is not None and self.dirty:
            if reads.used + self.nbytes > reads.cap:
                self.drop_clean()  # crude but O(1) per entry: start this partition afresh
            if self.nbytes <= reads.cap:
                clean = self.clean
                if clean:
                    clean.update(self.dirty)
                else:
                    clean = self.clean = self.dirty
                # Keys repeat across checkpoints: estimate from this checkpoint's mean entry.
                size = len(clean) * self.nbytes // len(self.dirty)
                reads.used += size - self.clean_nbytes
                self.clean_nbytes = size
        self._forget_dirty()

    def discard(self) -> None:
        """The updates were aborted: drop them and everything derived from them (the read
        cache holds committed values only and stays)."""
        self._forget_dirty()
        self.memo.clear()

    def drop_clean(self) -> None:
        """Empty the read cache (on close, or when it reaches its cap)."""
        if self.reads is not None:
            self.reads.used -= self.clean_nbytes
        self.clean = {}
        self.clean_nbytes = 0

    def _forget_dirty(self) -> None:
        self.budget.used -= self.nbytes
        self.nbytes = 0
        self.dirty = {}
