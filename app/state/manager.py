"""The RocksDB state backend: what the loop and the checkpoint call (see :mod:`.backend`).

Partition life cycle: ``assign`` (in the rebalance callback: noted, no I/O) → ``recover`` (from
the main loop: open the stores, restore each from its changelog in time-boxed slices) → open:
steps read and write through :meth:`partition` → ``revoke``/``lost`` close it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from app.errors import CheckpointAborted, PartitionsMigrated, RecoveryError, StateCorrupted
from app.state.cache import CacheBudget, PartitionState
from app.state.errors import changelog_errors
from app.state.locking import StateDirLock
from app.state.store import StorePartition
from changelog.format import DEFAULT_CF, changelog_headers, processed_offset
from changelog.recovery import Restorer
from changelog.restore_task import RestoreProgress, RestoreTask
from changelog.writer import ChangelogWriter, RecordSink

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]
Watermarks = Callable[[list[tuple[str, int]]], dict[tuple[str, int], tuple[int, int]]]


class RocksDBState:
    """Stores, write-behind caches, changelogs and recovery for every assigned partition.

    Args:
        root: ``state_dir/<group_id>``; one database per store/topic/partition below it.
        changelogs: changelog topic name per (store, input topic).
        cache_max_bytes: cap on the uncommitted updates of all partitions together.
        restorer: runs the restore tasks (owns the read_committed restore consumer).
        watermarks: (low, high) offsets per changelog partition (high read uncommitted).
        lock: the held lock on ``root`` (released by :meth:`close`).
    """

    stateful = True

    def __init__(
        self,
        root: Path,
        changelogs: dict[tuple[str, str], str],
        cache_max_bytes: int,
        restorer: Restorer,
        watermarks: Watermarks,
        lock: StateDirLock | None = None,
    ) -> None:
        self._root = root
        self._changelogs = changelogs
        self._stores = sorted({store for store, _ in changelogs})
        # Partitions of other topics hold no state (a regrouped pipeline's inputs).
        self._topics = {topic for _, topic in changelogs}
        self._budget = CacheBudget(cache_max_bytes)
        self._reads = CacheBudget(cache_max_bytes)  # committed values kept for reading
        self._restorer = restorer
        self._watermarks = watermarks
        self._lock = lock
        self._writer = ChangelogWriter()
        self._open: dict[TopicPartitionKey, dict[str, PartitionState]] = {}
        self._pending: set[TopicPartitionKey] = set()
        self._recovering: dict[TopicPartitionKey, dict[str, PartitionState]] = {}
        self._tasks_left: dict[TopicPartitionKey, int] = {}

    # ---- StateAccess (for the steps) -------------------------------------------------------

    @property
    def access(self) -> RocksDBState:
        return self

    def partition(self, store: str, topic: str, partition: int) -> PartitionState:
        """The state of ``store`` for input partition ``topic[partition]``.

        Raises:
            PartitionsMigrated: the partition is not assigned here, or not recovered yet.
        """
        try:
            return self._open[(topic, partition)][store]
        except KeyError:
            raise PartitionsMigrated(
                f"state of store {store!r} for {topic}[{partition}] is not open here "
                f"(partition not assigned or not recovered yet)"
            ) from None

    # ---- assignment (rebalance callbacks: no I/O) ------------------------------------------

    def assign(self, partitions: list[TopicPartitionKey]) -> None:
        for tp in partitions:
            if tp not in self._open and tp[0] in self._topics:
                self._pending.add(tp)

    def revoke(self, partitions: list[TopicPartitionKey]) -> None:
        self._close_partitions(partitions, discard=False)

    def lost(self, partitions: list[TopicPartitionKey]) -> None:
        self._close_partitions(partitions, discard=True)

    def pending_recovery(self) -> list[TopicPartitionKey]:
        return sorted(self._pending)

    # ---- recovery (main loop) --------------------------------------------------------------

    def recover(self, committed: dict[TopicPartitionKey, int], budget_s: float) -> bool:
        deadline = time.monotonic() + budget_s
        starting = [tp for tp in sorted(self._pending) if tp not in self._recovering]
        with changelog_errors():
            if starting:
                self._begin(starting, committed)
            for task in self._restorer.run(deadline):
                self._task_finished((task.changelog, task.partition))
        return not self._pending

    def progress(self) -> list[RestoreProgress]:
        """Where every running restore stands (remaining offsets per changelog partition)."""
        return self._restorer.progress()

    def _begin(
        self, partitions: list[TopicPartitionKey], committed: dict[TopicPartitionKey, int]
    ) -> None:
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            raise RecoveryError(
                f"recover() needs the group's committed offset of {missing} (-1001 = none)"
            )
        marks = self._watermarks(
            [(self._changelogs[(s, t)], p) for t, p in partitions for s in self._stores]
        )
        for tp in partitions:
            topic, partition = tp
            states = {store: self._open_state(store, topic, partition) for store in self._stores}
            self._recovering[tp] = states
            self._tasks_left[tp] = 0
            for state in states.values():
                low, high = marks[(state.changelog, partition)]
                task = RestoreTask(
                    changelog=state.changelog,
                    partition=partition,
                    start=_start_offset(state.store, low, high),
                    target=high,
                    committed={topic: committed[tp]},
                    sink=state.store,
                )
                if not task.done:
                    self._restorer.add(task)
                    self._tasks_left[tp] += 1
            if not self._tasks_left[tp]:
                self._ready(tp)

    def _open_state(self, store: str, topic: str, partition: int) -> PartitionState:
        path = self._root / store / topic / str(partition)
        where = f"store {store!r} of {topic}[{partition}]"
        changelog = self._changelogs[(store, topic)]
        store_partition = StorePartition(path, where)
        return PartitionState(store_partition, changelog, partition, self._budget, self._reads)

    def _task_finished(self, changelog_partition: tuple[str, int]) -> None:
        changelog, partition = changelog_partition
        for tp, states in self._recovering.items():
            if tp[1] == partition and any(s.changelog == changelog for s in states.values()):
                self._tasks_left[tp] -= 1
                if not self._tasks_left[tp]:
                    self._ready(tp)
                return

    def _ready(self, tp: TopicPartitionKey) -> None:
        self._open[tp] = self._recovering.pop(tp)
        del self._tasks_left[tp]
        self._pending.discard(tp)
        log.info("state of %s[%d] is ready", tp[0], tp[1])

    # ---- checkpoint ------------------------------------------------------------------------

    def needs_checkpoint(self) -> bool:
        return self._budget.full

    def produce_changelogs(self, sink: RecordSink, positions: dict[TopicPartitionKey, int]) -> None:
        self._writer.reset()
        for (topic, partition), states in self._open.items():
            for state in states.values():
                if not state.dirty:
                    continue
                position = positions.get((topic, partition))
                if position is None:
                    raise CheckpointAborted(
                        f"no consumer position for {topic}[{partition}] although store "
                        f"{state.changelog} holds {len(state.dirty)} uncommitted updates"
                    )
                headers = changelog_headers(DEFAULT_CF, {topic: processed_offset(position)})
                self._writer.produce(sink, state.changelog, partition, state.dirty, headers)
                state.set_aside()  # later updates are the next checkpoint's

    def verify_delivery(self) -> None:
        unconfirmed = self._writer.unconfirmed()
        if unconfirmed:
            raise CheckpointAborted(f"{unconfirmed} changelog record(s) not confirmed")

    def after_commit(self) -> None:
        open_partitions = list(self._open.items())
        for i, (tp, states) in enumerate(open_partitions):
            try:
                self._write_committed(states)
            except StateCorrupted as exc:
                # This and every later partition miss committed updates that only the
                # changelog holds now: all of them are restored from it.
                unwritten = [tp] + [later for later, _ in open_partitions[i + 1 :]]
                raise StateCorrupted(str(exc), unwritten) from exc
        self._writer.reset()

    def _write_committed(self, states: dict[str, PartitionState]) -> None:
        now = time.monotonic()
        for state in states.values():
            if not state.committing:
                state.write_if_due(now)
                continue
            offset = self._writer.offset(state.changelog, state.partition)
            if offset is None:
                raise StateCorrupted(
                    f"{state.store.where}: committed without a delivered changelog record "
                    f"in {state.changelog}[{state.partition}]"
                )
            state.mark_committed(offset, now)
            state.write_if_due(now)

    def discard(self) -> None:
        for states in self._open.values():
            for state in states.values():
                state.discard()
        self._writer.reset()

    def wipe(self, partitions: list[TopicPartitionKey]) -> None:
        for tp in partitions:
            for state in (self._open.get(tp) or self._recovering.get(tp) or {}).values():
                state.forget_unwritten()
                state.store.wipe()
        self._close_partitions(partitions, discard=True)
        self.assign(partitions)  # pending: recovered from the changelog's start

    # ---- closing ---------------------------------------------------------------------------

    def _close_partitions(self, partitions: list[TopicPartitionKey], discard: bool) -> None:
        gone = {tp for tp in partitions if tp[0] in self._topics}
        changelog_partitions = {
            (self._changelogs[(s, t)], p) for t, p in gone for s in self._stores
        }
        self._restorer.remove(lambda t: (t.changelog, t.partition) not in changelog_partitions)
        for tp in gone:
            self._pending.discard(tp)
            self._tasks_left.pop(tp, None)
            states = self._open.pop(tp, None) or self._recovering.pop(tp, None) or {}
            for state in states.values():
                uncommitted = len(state.dirty) + len(state.committing)
                if uncommitted and not discard:
                    log.warning(
                        "%s: closing with %d uncommitted updates (dropped)",
                        state.store.where,
                        uncommitted,
                    )
                state.discard()
                _write_unwritten(state)
                state.drop_clean()
                state.store.close()

    def close(self) -> None:
        self._restorer.close()
        everything = list(self._open) + list(self._recovering)
        self._close_partitions(everything, discard=True)
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def _write_unwritten(state: PartitionState) -> None:
    """Closing: committed updates not yet in RocksDB go there now; if RocksDB refuses, the
    next owner's recovery replays them from the changelog (the stored offset is older)."""
    try:
        state.write_unwritten()
    except StateCorrupted as exc:
        log.warning("%s; recovery replays them from the changelog", exc)
        state.forget_unwritten()


def _start_offset(store: StorePartition, low: int, high: int) -> int:
    """First changelog offset to read: after the stored one, or from the start after a wipe."""
    stored = store.changelog_offset()
    if stored is not None and stored >= high:
        # The changelog ends before what the store reflects: it was deleted and re-created or
        # truncated. The local state cannot be trusted (Kafka Streams: "task corrupted").
        log.warning(
            "%s: stored changelog offset %d is not below the changelog's end offset %d",
            store.where,
            stored,
            high,
        )
        store.wipe()
        stored = None
    return low if stored is None else max(stored + 1, low)
