"""Steps whose function sees the whole record, not only its value (``record=True``).

``Pipeline().map(fn, record=True)`` calls ``fn(Record)``: the value plus the key, headers,
timestamp and the source topic, partition and offset. Opt-in, because building the view costs
an object per record and step, and such steps never take the fused fast path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.pipeline.record import Row
from app.pipeline.steps import StepContext


@dataclass(slots=True, frozen=True)
class Record:
    """What a record-level function sees (read-only; return the new value instead).

    Attributes:
        value: the decoded value (after earlier steps).
        key: the key: bytes as read from Kafka, or what an earlier ``key_by`` returned.
        headers: ``(name, bytes)`` pairs as read from Kafka.
        timestamp: milliseconds since the epoch (Kafka's record timestamp).
        topic: the input topic the record came from.
        partition: its input partition.
        offset: its input offset.
    """

    value: Any
    key: Any
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    topic: str
    partition: int
    offset: int

    @classmethod
    def of(cls, row: Row) -> Record:
        """The view of a pipeline row."""
        headers = tuple(row.headers or ())
        return cls(
            row.value, row.key, headers, row.timestamp, row.source_topic, row.partition, row.offset
        )

    def header(self, name: str) -> bytes | None:
        """The value of the last header called ``name``, if any."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


@dataclass(slots=True)
class RecordFilter:
    """Keep the rows for which ``predicate(Record)`` is true."""

    predicate: Callable[[Record], Any]
    name: str = "filter"
    stateful: bool = False

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        pred = self.predicate
        kept = []
        for r in rows:
            ok, keep = ctx.guarded(self.name, r, lambda row: pred(Record.of(row)))
            if ok and keep:
                kept.append(r)
        return kept


@dataclass(slots=True)
class RecordApply:
    """Set each row's ``target`` (value, key or topic) to ``fn(Record)``.

    For ``value``, None drops the row and a list fans out, as with :class:`~app.pipeline.steps.
    Apply`.
    """

    fn: Callable[[Record], Any]
    target: str = "value"
    name: str = "map"
    stateful: bool = False
    repartition: bool = True  # key_by before a stateful step: regroup (app.pipeline.split)
    partitions: int | None = None  # of the repartition topic (None: the inputs' largest count)

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        fn = self.fn
        out: list[Row] = []
        for r in rows:
            ok, result = ctx.guarded(self.name, r, lambda row: fn(Record.of(row)))
            if not ok:
                continue
            if self.target != "value":
                setattr(r, self.target, result)
                out.append(r)
            elif isinstance(result, list):
                out.extend(r.derive(v) for v in result)
            elif result is not None:
                r.value = result
                out.append(r)
        return out
