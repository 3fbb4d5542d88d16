"""Repairs of the assignment that the reaction ladder orders: re-assign at the committed
offsets, or wipe and restore a partition's state."""

from __future__ import annotations

import logging

from confluent_kafka import TopicPartition

from app.kafka.ports import ConsumerPort, positions_text
from app.offsets import OffsetStore
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.state.backend import StateBackend

log = logging.getLogger(__name__)


class PartitionRepair:
    """Puts assigned partitions back on their feet after the open transaction was aborted.

    Args:
        reset_offset: where a partition without a committed offset starts.
    """

    def __init__(
        self,
        consumer: ConsumerPort,
        offsets: OffsetStore,
        state: StateBackend,
        health: Health,
        metrics: Metrics,
        reset_offset: int,
        incremental: bool = False,
    ) -> None:
        self._consumer = consumer
        self._incremental = incremental
        self._offsets = offsets
        self._state = state
        self._health = health
        self._metrics = metrics
        self._reset = reset_offset

    def reassign_at_committed(self) -> None:
        """Assign the current partitions again, each at its committed offset.

        librdkafka issue #5586 (open): when the OffsetFetch that follows an assignment fails
        with a request-level ``NOT_COORDINATOR`` (the group coordinator just moved), the
        partitions wait for their committed offsets forever: no fetch, no retry, no error
        after the first. An ``assign()`` with explicit offsets starts them (incremental
        protocol: ``assign`` is refused there, so unassign them and assign them again).
        """
        assignment = self._consumer.assignment()
        if not assignment:
            return
        targets = [
            TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else self._reset)
            for tp in self._offsets.committed(assignment)
        ]
        if self._incremental:
            self._consumer.incremental_unassign(assignment)
            self._consumer.incremental_assign(targets)
        else:
            self._consumer.assign(targets)
        pending = self._state.pending_recovery()
        if pending:  # still restoring: stays paused until the rebalancer's recover() resumes it
            self._consumer.pause([TopicPartition(t, p) for t, p in pending])
        log.warning(
            "re-assigned %s at their committed offsets (librdkafka could not fetch them)",
            positions_text(targets),
        )

    def restore_again(self, partitions: list[tuple[str, int]]) -> None:
        """State corrupted: wipe these partitions' stores, restore them from the changelog
        (paused meanwhile; the rebalancer's ``recover`` resumes them)."""
        log.warning("wiping the state of %s; restoring it from the changelog", partitions)
        self._state.wipe(partitions)
        self._consumer.pause([TopicPartition(t, p) for t, p in partitions])
        self._health.set_ready(False, f"restoring the state of {len(partitions)} partitions")
        self._metrics.ready.set(0)
