"""The progress line: what an operator reads first in a stuck pod."""

from __future__ import annotations

import logging
import time

from app.kafka.ports import ConsumerPort
from app.ops.metrics import Metrics

log = logging.getLogger(__name__)


class ProgressLog:
    """One INFO line every ``every`` seconds: what an operator reads first in a stuck pod."""

    def __init__(self, consumer: ConsumerPort, metrics: Metrics, every: float = 30.0) -> None:
        self._consumer = consumer
        self._metrics = metrics
        self._every = every
        self._next = time.monotonic() + every

    def maybe_log(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._every
        sample = self._metrics.registry.get_sample_value
        counts = [
            int(sample(f"eos_bridge_{name}_total") or 0)
            for name in (
                "input_records",
                "output_records",
                "produced_dead_letter_records",
                "checkpoints",
            )
        ]
        log.info(
            "progress: %d in, %d out, %d dead-lettered, %d checkpoints, %d partitions assigned",
            *counts,
            len(self._consumer.assignment()),
        )
