"""The write-behind cache: uncommitted updates of one store partition, capped in bytes.

Steps read and write through :class:`PartitionState`. Writes stay in memory until the checkpoint
commits (then they become one RocksDB WriteBatch) or aborts (then they are dropped), so RocksDB
only ever holds committed state. A checkpoint sets its updates aside once their changelog
records are produced (the *committing* layer): updates made after that, by the batch the
pipelined checkpoint transforms beside the commit (``pipelined_commit``), go to a new dirty
layer and are not part of that checkpoint. Reads look at dirty, then committing, then the read
cache, then RocksDB. The byte cap is shared by every partition of the process:
reaching it makes the loop checkpoint early instead of growing without bound.

Committed values also stay in memory after their checkpoint (a read cache with its own cap):
a key updated in one checkpoint is usually read again in the next, and a dict lookup costs a
fraction of a RocksDB ``get``. The read cache holds committed values only, so an abort keeps it.

RocksDB gets the committed updates of several checkpoints in one WriteBatch, at most
:data:`WRITE_BEHIND_S` after the first of them (Kafka Streams flushes its stores on commit; a
key counted in every checkpoint is written once per interval here, not once per checkpoint).
Until then they are in the read cache (``unwritten`` ⊆ ``clean``), which is never dropped
before they are written. A crash in between loses nothing: each WriteBatch carries the
changelog offset of its newest update, and recovery replays the changelog from there (as
after a crash between the commit and the write).
"""

from __future__ import annotations

from typing import Any

from app.state.store import StorePartition

# Rough per-entry overhead of a dict slot plus two bytes objects in CPython.
ENTRY_OVERHEAD = 120
# Committed updates reach RocksDB at most this many seconds after their checkpoint.
WRITE_BEHIND_S = 5.0
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
        "committing",
        "committing_nbytes",
        "dirty",
        "memo",
        "nbytes",
        "partition",
        "reads",
        "store",
        "undo",
        "unwritten",
        "unwritten_offset",
        "unwritten_since",
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
        # A checkpoint's updates between their changelog records and its commit.
        self.committing: dict[bytes, bytes | None] = {}
        self.committing_nbytes = 0
        self.clean: dict[bytes, bytes | None] = {}  # committed values (None = deleted)
        self.clean_nbytes = 0
        self.memo: dict[str, Any] = {}
        # Committed, in the read cache, not yet in RocksDB; their newest changelog offset.
        self.unwritten: dict[bytes, bytes | None] = {}
        self.unwritten_offset = -1
        self.unwritten_since = 0.0
        # While a stateful batch runs: each written key's uncommitted value before its first
        # write (the undo log of app.state.journal; None: not journaling).
        self.undo: dict[bytes, Any] | None = None

    def get(self, key: bytes) -> bytes | None:
        dirty = self.dirty
        if key in dirty:
            return dirty[key]
        committing = self.committing
        if committing and key in committing:
            return committing[key]
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
        undo = self.undo
        if undo is not None and key not in undo:
            undo[key] = old
        dirty[key] = value
        self.nbytes += delta
        self.budget.used += delta

    def delete(self, key: bytes) -> None:
        dirty = self.dirty
        old = dirty.get(key, _MISSING)
        delta = len(key) + ENTRY_OVERHEAD if old is _MISSING else -(0 if old is None else len(old))
        undo = self.undo
        if undo is not None and key not in undo:
            undo[key] = old
        dirty[key] = None
        self.nbytes += delta
        self.budget.used += delta

    def restore(self, key: bytes, prior: Any) -> None:
        """Put back ``key``'s uncommitted value as :attr:`undo` recorded it."""
        dirty = self.dirty
        now = dirty.pop(key, _MISSING)
        delta = 0 if now is _MISSING else -(len(key) + ENTRY_OVERHEAD + len(now or b""))
        if prior is not _MISSING:
            dirty[key] = prior
            delta += len(key) + ENTRY_OVERHEAD + len(prior or b"")
        self.nbytes += delta
        self.budget.used += delta

    def scan(self, lower: bytes, upper: bytes) -> list[tuple[bytes, bytes]]:
        """Entries with ``lower <= key < upper`` in key order, uncommitted updates included."""
        merged = dict(self.store.scan(lower, upper))
        for layer in (self.unwritten, self.committing, self.dirty):
            for key, value in layer.items():
                if lower <= key < upper:
                    if value is None:
                        merged.pop(key, None)
                    else:
                        merged[key] = value
        return sorted(merged.items())

    def set_aside(self) -> None:
        """Checkpoint step 1, once the changelog records of the updates are produced: they are
        the checkpoint's now (``committing``); later updates start a new dirty layer."""
        assert not self.committing, "a checkpoint's updates are still set aside"
        self.committing, self.committing_nbytes = self.dirty, self.nbytes
        self.dirty = {}
        self.nbytes = 0

    def mark_committed(self, changelog_offset: int, now: float) -> None:
        """Checkpoint step 5: the updates set aside are committed, and their changelog records
        end at ``changelog_offset``. They move to the read cache and reach RocksDB with this or
        a later checkpoint's (see the module's doc; ``memo`` stays valid).

        Raises:
            StateCorrupted: RocksDB refused the write.
        """
        reads = self.reads
        committed, nbytes = self.committing, self.committing_nbytes
        if reads is not None and committed:
            if reads.used + nbytes > reads.cap:
                self.write_unwritten()
                self.drop_clean()  # crude but O(1) per entry: start this partition afresh
            if nbytes <= reads.cap:
                clean = self.clean
                if clean:
                    clean.update(committed)
                else:
                    clean = self.clean = committed
                # Keys repeat across checkpoints: estimate from this checkpoint's mean entry.
                size = len(clean) * nbytes // len(committed)
                reads.used += size - self.clean_nbytes
                self.clean_nbytes = size
                if not self.unwritten:
                    self.unwritten_since = now
                self.unwritten.update(committed)
                self.unwritten_offset = changelog_offset
                self._forget_committing()
                return
        # No read cache, or the updates alone exceed it: nothing could serve them unwritten.
        self.store.write(committed, changelog_offset)
        self._forget_committing()

    def write_if_due(self, now: float) -> None:
        """After each checkpoint: write the unwritten updates once the oldest is
        :data:`WRITE_BEHIND_S` old."""
        if self.unwritten and now - self.unwritten_since >= WRITE_BEHIND_S:
            self.write_unwritten()

    def write_unwritten(self) -> None:
        """Write the committed updates RocksDB does not have yet, with their changelog offset.

        Raises:
            StateCorrupted: RocksDB refused the write (nothing of it was written).
        """
        if self.unwritten:
            self.store.write(self.unwritten, self.unwritten_offset)
            self.unwritten = {}

    def forget_unwritten(self) -> None:
        """The store is being wiped: its committed updates come back from the changelog."""
        self.unwritten = {}

    def discard(self) -> None:
        """The updates were aborted (or the checkpoint they wait for): drop them, set aside or
        not, and everything derived from them (the read cache holds committed values only and
        stays)."""
        self._forget_committing()
        self._forget_dirty()
        self.memo.clear()
        self.undo = None

    def drop_clean(self) -> None:
        """Empty the read cache (on close, or when it reaches its cap), after
        :meth:`write_unwritten` or :meth:`forget_unwritten`."""
        assert not self.unwritten, "the read cache holds updates RocksDB does not have"
        if self.reads is not None:
            self.reads.used -= self.clean_nbytes
        self.clean = {}
        self.clean_nbytes = 0

    def _forget_committing(self) -> None:
        self.budget.used -= self.committing_nbytes
        self.committing_nbytes = 0
        self.committing = {}

    def _forget_dirty(self) -> None:
        self.budget.used -= self.nbytes
        self.nbytes = 0
        self.dirty = {}
