"""The write-behind cache: uncommitted updates of one store partition, capped in bytes.

Steps read and write through :class:`PartitionState`. Writes stay in memory until the checkpoint
commits (then they become one RocksDB WriteBatch) or aborts (then they are dropped), so RocksDB
only ever holds committed state. The byte cap is shared by every partition of the process:
reaching it makes the loop checkpoint early instead of growing without bound.
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

    __slots__ = ("budget", "changelog", "dirty", "memo", "nbytes", "partition", "store")

    def __init__(
        self, store: StorePartition, changelog: str, partition: int, budget: CacheBudget
    ) -> None:
        self.store = store
        self.changelog = changelog
        self.partition = partition
        self.budget = budget
        self.dirty: dict[bytes, bytes | None] = {}
        self.nbytes = 0
        self.memo: dict[str, Any] = {}

    def get(self, key: bytes) -> bytes | None:
        dirty = self.dirty
        if key in dirty:
            return dirty[key]
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
        """The updates are in RocksDB now: drop them from memory (``memo`` stays valid)."""
        self.budget.used -= self.nbytes
        self.nbytes = 0
        self.dirty = {}

    def discard(self) -> None:
        """The updates were aborted: drop them and everything derived from them."""
        self.committed()
        self.memo.clear()
