"""The consumer-lag gauge, from what the consumer already knows."""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition

from app.kafka.ports import ConsumerPort
from app.ops.metrics import Metrics


class LagReport:
    """Updates the consumer-lag gauge from the consumer's positions and the high watermarks
    librdkafka cached from its last fetches: no broker round trip, no per-record cost.

    Args:
        every: seconds between updates when :meth:`maybe_update` is called every batch.
    """

    def __init__(self, consumer: ConsumerPort, metrics: Metrics, every: float = 5.0) -> None:
        self._consumer = consumer
        self._metrics = metrics
        self._every = every
        self._next = 0.0

    def maybe_update(self) -> None:
        if time.monotonic() >= self._next:
            self.update()

    def update(self) -> None:
        """One update now, for every assigned partition whose position and watermark are known."""
        self._next = time.monotonic() + self._every
        assignment = self._consumer.assignment()
        if not assignment:
            return
        for tp in self._consumer.position(assignment):
            if tp.offset < 0:
                continue  # nothing consumed yet: no position to measure from
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), cached=True
            )
            if high >= 0:
                self._metrics.lag.labels(tp.topic, str(tp.partition)).set(max(0, high - tp.offset))
