"""The consumer-lag gauge, from the committed positions and the cached high watermarks."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import TopicPartition

from app.kafka.ports import ConsumerPort
from app.ops.metrics import Metrics

Committed = Callable[[], Mapping[tuple[str, int], int]]


class LagReport:
    """Updates the consumer-lag gauge from the **committed** positions (what a group-lag tool
    shows: an abort loop that consumes everything and commits nothing keeps its lag) and the
    high watermarks librdkafka cached from its last fetches: no per-record cost.

    Args:
        committed: the committed offset per assigned partition, as the checkpoint knows it
            (None: the consumer's positions, for tools without a checkpoint).
        waiting: told the total committed lag after each update (``/livez``).
        every: seconds between updates when :meth:`maybe_update` is called every batch.
        after_checkpoint_gap: the least seconds between two :meth:`after_checkpoint` updates.
    """

    def __init__(
        self,
        consumer: ConsumerPort,
        metrics: Metrics,
        every: float = 5.0,
        after_checkpoint_gap: float = 1.0,
        committed: Committed | None = None,
        waiting: Callable[[int], None] | None = None,
    ) -> None:
        self._consumer = consumer
        self._metrics = metrics
        self._committed = committed
        self._waiting = waiting
        self._every = every
        self._gap = after_checkpoint_gap
        self._next = 0.0
        self._last = float("-inf")

    def maybe_update(self) -> None:
        if time.monotonic() >= self._next:
            self.update()

    def after_checkpoint(self) -> None:
        """At the committed positions (what a group-lag tool shows), at most once per
        ``after_checkpoint_gap``: at a 100 ms commit interval an update per checkpoint would ask
        librdkafka's main thread for the assignment ten times a second. A skipped one is made
        up by :meth:`maybe_update` once the gap has passed."""
        if time.monotonic() - self._last >= self._gap:
            self.update()
        else:
            self._next = min(self._next, self._last + self._gap)

    def update(self) -> None:
        """One update now, for every assigned partition whose position and watermark are known."""
        self._last = time.monotonic()
        self._next = self._last + self._every
        assignment = self._consumer.assignment()
        if not assignment:
            return
        committed = self._committed() if self._committed is not None else {}
        total = 0
        for tp in self._consumer.position(assignment):
            if tp.offset < 0:
                continue  # nothing consumed yet: no position to measure from
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), cached=True
            )
            if high < 0:
                continue
            start = committed.get((tp.topic, tp.partition), tp.offset)
            if start < 0:  # nothing committed yet: from the start of the log
                start = max(low, 0)
            lag = max(0, high - min(start, tp.offset))
            self._metrics.lag.labels(tp.topic, str(tp.partition)).set(lag)
            total += lag
        if self._waiting is not None:
            self._waiting(total)
