"""Which replayed records a window step will drop as late: the rule ``dlq replay`` reports.

A window closes once its partition's stream time reaches its end plus the grace period
(app.pipeline.stateful.windows). A replayed record is late for a window step when the latest
window that holds its event time ``t`` has closed: ``floor(t / hop) * hop + size + grace <=
clock``, where ``clock`` is the latest event time of the input partition the record goes back
to: the latest of its last records (read before the replay writes) and of the records replayed
to it before this one. The partition's real stream time is at least that, so a record reported
late is late; a step after a ``key_by`` keeps its clock per repartition partition, which this
estimate does not see.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from app.kafka.topics import KafkaRecord
from app.pipeline.builder import Pipeline
from app.pipeline.record import Row
from app.pipeline.stateful.kit import Extractor, event_time, extractor
from app.pipeline.stateful.windows import Window
from app.serde import json


def latest_window_end(t: int, size: int, hop: int) -> int:
    """End of the last window ``[s, s + size)``, ``s`` a multiple of ``hop``, holding ``t``."""
    return t - t % hop + size


class Lateness:
    """Counts, per window step, the replayed records it will drop as late.

    Args:
        pipeline: the running bridge's pipeline; its window steps are judged.
        json_values: values are JSON (``input_format: json``): needed for an event-time field.
    """

    def __init__(self, pipeline: Pipeline, json_values: bool) -> None:
        self._windows = [s for s in pipeline.steps if isinstance(s, Window)]
        self._json = json_values
        self._times: list[Extractor | None] = [
            None if w.timestamp is None else extractor(w.timestamp) for w in self._windows
        ]
        self._clocks: dict[tuple[int, str, int], int] = {}  # (window, topic, partition) → ms
        self.late: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()  # event time not readable from the raw record

    @property
    def windows(self) -> bool:
        """The pipeline has a window step."""
        return bool(self._windows)

    @property
    def graces(self) -> dict[str, int]:
        """Each window step's grace period in ms, by step name."""
        return {w.name: w.grace for w in self._windows}

    def observe(self, records: Iterable[KafkaRecord]) -> None:
        """The input partitions' latest records: they set each partition's clock."""
        for record in records:
            for i, t in enumerate(self._event_times(record)):
                if t is not None:
                    self._advance(i, record.topic, record.partition, t)

    def judge(self, record: KafkaRecord) -> None:
        """One record replayed to ``record.topic[record.partition]``: late for which steps."""
        for i, t in enumerate(self._event_times(record)):
            w = self._windows[i]
            if t is None:
                self.unknown[w.name] += 1
                continue
            clock = self._clocks.get((i, record.topic, record.partition))
            if clock is not None and latest_window_end(t, w.size, w.hop) + w.grace <= clock:
                self.late[w.name] += 1
            self._advance(i, record.topic, record.partition, t)

    def _advance(self, i: int, topic: str, partition: int, t: int) -> None:
        slot = (i, topic, partition)
        self._clocks[slot] = max(t, self._clocks.get(slot, t))

    def _event_times(self, record: KafkaRecord) -> list[int | None]:
        if not self._windows:
            return []
        value: Any = None
        if self._json and any(f is not None for f in self._times):
            try:
                value = json.loads(record.value or b"")
            except json.JSONDecodeError:
                value = None
        row = Row(
            value,
            record.key,
            None,
            record.topic,
            record.partition,
            record.offset,
            record.timestamp,
        )
        times: list[int | None] = []
        for f in self._times:
            if f is None:
                times.append(record.timestamp)
                continue
            try:
                times.append(event_time(f(row)) if value is not None else None)
            except Exception:  # a field missing or not a time: the bridge dead-letters it
                times.append(None)
        return times
