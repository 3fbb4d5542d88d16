"""Rebalance callbacks: commit on revoke, abort on lost, pause partitions until recovered.

The callbacks run inside ``consumer.consume()``; they only commit or record. State recovery
runs from the main loop (:meth:`Rebalancer.recover`), never inside a callback. Aborts go
through the reaction ladder (:class:`app.engine.ladder.Ladder`), like the loop's.

Two protocols. ``classic`` (eager): every callback carries the whole assignment, set with
``assign``. ``consumer`` (KIP-848, incremental): a callback carries only the partitions added,
revoked or lost, changed with ``incremental_assign``/``incremental_unassign``; the partitions
that stay are never paused, rewound or re-initialised (a revoke commits the open transaction,
which spans every partition, and the others go on from there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import TopicPartition

from app.engine.checkpoint import Checkpoint
from app.engine.ladder import Ladder
from app.errors import CheckpointAborted, PartitionsMigrated, ProducerFenced
from app.kafka.ports import ConsumerPort, Rebalanced
from app.offsets import OffsetStore
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.state.backend import StateBackend

log = logging.getLogger(__name__)


class Tasks(Protocol):
    """Per-partition producers (two clusters, :class:`app.engine.tasks.TaskAssignment`)."""

    def assign(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...
    def revoke(self, partitions: list[TopicPartition]) -> None: ...


class Rebalancer:
    """Owns the assignment: what is assigned, what waits for recovery, readiness."""

    def __init__(
        self,
        consumer: ConsumerPort,
        checkpoint: Checkpoint,
        state: StateBackend,
        metrics: Metrics,
        health: Health,
        offsets: OffsetStore,
        ladder: Ladder,
        tasks: Tasks | None = None,
        incremental: bool = False,
    ) -> None:
        self._consumer = consumer
        self._incremental = incremental
        self._tasks = tasks
        self._checkpoint = checkpoint
        self._state = state
        self._metrics = metrics
        self._health = health
        self._offsets = offsets
        self._ladder = ladder
        self._error: BaseException | None = None
        # Paused until their state is restored; a restore may take several recover() calls,
        # so they are remembered here, not read back from the state's (shrinking) pending list.
        self._paused: set[tuple[str, int]] = set()

    def callbacks(self) -> dict[str, Rebalanced]:
        return {
            "on_assign": self._guarded("assign", self._on_assign),
            "on_revoke": self._guarded("revoke", self._on_revoke),
            "on_lost": self._guarded("lost", self._on_lost),
        }

    def _guarded(
        self, kind: str, fn: Callable[[ConsumerPort, list[TopicPartition]], None]
    ) -> Rebalanced:
        """Keep exceptions out of librdkafka's callback machinery; the loop re-raises them.
        Each callback is timed and its partitions counted by ``kind`` (a failed one too)."""

        def callback(consumer: ConsumerPort, partitions: list[TopicPartition]) -> None:
            self._metrics.rebalance_partitions.labels(kind).inc(len(partitions))
            started = time.perf_counter()
            try:
                fn(consumer, partitions)
            except Exception as exc:
                log.error("rebalance callback %s failed: %s", fn.__name__, exc)
                self._error = self._error or exc
            finally:
                elapsed = time.perf_counter() - started
                self._metrics.rebalance_seconds.labels(kind).observe(elapsed)

        return callback

    def raise_pending(self) -> None:
        """Re-raise, in the loop, a fatal error that happened inside a callback."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def recover(self, budget_s: float) -> None:
        """Restore pending partitions for up to ``budget_s``; resume them when done."""
        pending = self._state.pending_recovery()
        tps = [TopicPartition(t, p) for t, p in pending]
        committed = {(tp.topic, tp.partition): tp.offset for tp in self._offsets.committed(tps)}
        done = self._state.recover(committed, budget_s)
        self._metrics.recovery_remaining.clear()  # finished restores drop out of progress()
        for task in self._state.progress():
            labels = (task.changelog, str(task.partition))
            self._metrics.recovery_remaining.labels(*labels).set(task.remaining)
        if done:
            # Every assigned partition: also those a repair paused to restore them again
            # (PartitionRepair.restore_again), which never were in self._paused.
            paused, self._paused = sorted(self._paused), set()
            assignment = self._consumer.assignment()
            self._consumer.resume(assignment)
            self._health.set_ready(True, f"running, {len(assignment)} partitions")
            self._metrics.ready.set(1)
            log.info("state recovered for %s; partitions resumed", paused)

    def _on_assign(self, consumer: ConsumerPort, partitions: list[TopicPartition]) -> None:
        self._metrics.rebalances.labels("assign").inc()
        keys = [(tp.topic, tp.partition) for tp in partitions]
        log.info("assigned %s", keys)
        self._state.assign(keys)
        pending = self._state.pending_recovery()
        if self._tasks is not None:  # fence the tasks' old owners, then start where they committed
            partitions = self._tasks.assign(partitions)
        if self._incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        self._checkpoint.assigned(keys)
        self._metrics.commit_age.assigned(keys)
        # librdkafka keeps a partition's pause across unassign and assign: one revoked while it
        # was restoring would come back paused for good if its state is now complete.
        if ready := [tp for tp in partitions if (tp.topic, tp.partition) not in pending]:
            consumer.resume(ready)
        if pending:
            # Nothing of a partition is processed before its state is restored.
            consumer.pause([TopicPartition(t, p) for t, p in pending])
            self._paused.update(pending)
        self._report_readiness()

    def _report_readiness(self) -> None:
        """Ready when no assigned partition waits for its state."""
        if pending := self._state.pending_recovery():
            self._health.set_ready(False, f"recovering state of {len(pending)} partitions")
            self._metrics.ready.set(0)
        else:
            count = len(self._consumer.assignment())
            self._health.set_ready(True, f"running, {count} partitions")
            self._metrics.ready.set(1)

    def _on_revoke(self, consumer: ConsumerPort, partitions: list[TopicPartition]) -> None:
        self._metrics.rebalances.labels("revoke").inc()
        keys = [(tp.topic, tp.partition) for tp in partitions]
        log.info("revoked %s: committing what was processed", keys)
        try:
            self._checkpoint.commit()
        except (CheckpointAborted, ProducerFenced) as exc:
            # Eager: every partition goes, no rewind. Incremental: those that stay rewind.
            self._ladder.react(exc, rewind=self._incremental)
        if self._tasks is not None:
            self._tasks.revoke(partitions)
        self._state.revoke(keys)
        self._paused.difference_update(keys)
        self._checkpoint.forget(keys)
        self._metrics.forget_partitions(keys)
        if self._incremental:  # the others stay as they are
            consumer.incremental_unassign(partitions)
            self._report_readiness()
            return
        self._health.set_ready(False, "rebalancing")
        self._metrics.ready.set(0)

    def _on_lost(self, consumer: ConsumerPort, partitions: list[TopicPartition]) -> None:
        self._metrics.rebalances.labels("lost").inc()
        keys = [(tp.topic, tp.partition) for tp in partitions]
        log.warning("partitions lost %s: aborting uncommitted work", keys)
        lost = PartitionsMigrated(f"partitions lost: {keys}", reason="partitions_lost")
        if self._incremental:  # the lost go at once; the abort rewinds those that stay
            consumer.incremental_unassign(partitions)
        self._ladder.react(lost, rewind=self._incremental)
        if self._tasks is not None:
            self._tasks.revoke(partitions)
        self._state.lost(keys)
        self._paused.difference_update(keys)
        self._checkpoint.forget(keys)
        self._metrics.forget_partitions(keys)
        self._health.set_ready(False, "partitions lost, rejoining")
        self._metrics.ready.set(0)
