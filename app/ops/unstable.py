"""Hanging transactions seen: per partition the bridge writes, the gap between the high
watermark and the last stable offset, and how long the LSO has stood still with a gap.

The bridge's own open transaction also makes a gap, but its LSO moves at every checkpoint (at
most ``commit_interval`` apart, and never older than 60 % of ``transaction.timeout.ms``); an LSO
that stands still with a gap for longer than ``transaction.timeout.ms`` is someone else's open
transaction (another producer, a crashed instance nobody re-initialised, a broker bug) and
stops every ``read_committed`` reader downstream. docs/operations.md: "Hanging transactions".
Measured on its own thread, off the processing path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

log = logging.getLogger(__name__)

Partition = tuple[str, int]
Measure = Callable[[], dict[Partition, tuple[int, int]]]  # (high watermark, LSO)
EVERY_S = 5.0


class UnstableOffsets:
    """``eos_bridge_output_unstable_offsets`` and ``eos_bridge_output_unstable_seconds``."""

    def __init__(
        self,
        measure: Measure,
        registry: CollectorRegistry,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._measure = measure
        self._every_s = every_s
        self._clock = clock
        self._since: dict[Partition, tuple[int, float]] = {}  # LSO with a gap, since when
        self._stop = threading.Event()
        self.offsets = Gauge(
            "eos_bridge_output_unstable_offsets",
            "Offsets between the high watermark and the last stable offset of a partition the "
            "bridge writes (held back from read_committed readers by an open transaction)",
            ["topic", "partition"],
            registry=registry,
        )
        self.seconds = Gauge(
            "eos_bridge_output_unstable_seconds",
            "Seconds the last stable offset of a partition the bridge writes has stood still "
            "with a gap above 0 (0: no gap); above transaction.timeout.ms: a hanging transaction",
            ["topic", "partition"],
            registry=registry,
        )

    def tick(self) -> None:
        """Measure once and set the gauges."""
        now = self._clock()
        for (topic, partition), (high, stable) in self._measure().items():
            gap = max(0, high - stable)
            key = (topic, partition)
            self.offsets.labels(topic, str(partition)).set(gap)
            if gap == 0:
                self._since.pop(key, None)
                self.seconds.labels(topic, str(partition)).set(0)
                continue
            lso, since = self._since.get(key, (stable, now))
            if lso != stable:  # the LSO moved: a transaction ended, a new one may hold it
                since = now
            self._since[key] = (stable, since)
            self.seconds.labels(topic, str(partition)).set(now - since)

    def start(self) -> UnstableOffsets:
        threading.Thread(target=self._run, name="eos-bridge-unstable", daemon=True).start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.tick()
            except Exception as exc:  # a metric must never end the bridge
                log.debug("unstable offsets not measured: %s", exc)

    def stop(self) -> None:
        self._stop.set()
