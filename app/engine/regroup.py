"""The repartition hop at run time (the plan is :mod:`app.pipeline.split`'s).

Per batch: the records of the repartition topic are taken out before decoding
(:meth:`Regrouper.split`, :meth:`Regrouper.decode`); the head runs on the input records and its
rows are produced to the repartition topic inside the open transaction
(:meth:`Regrouper.forward`), keyed by the state key, with the input's timestamp; the tail runs
on the repartition records. State, changelogs and stream time are those of the repartition
partitions (the tail's rows come from there), and the consumer's positions, committed in the
same transaction, include them: read_committed consumption of the hop keeps the pipeline
exactly once. Before output, each tail row is given back the input record it came from
(:meth:`Regrouper.restore`), for ``_source_*`` fields, output headers and dead letters.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.errors import RecordError
from app.kafka.ports import Message
from app.pipeline.record import Failure, Row
from app.pipeline.split import Regroup
from app.pipeline.stateful.kit import SOURCE_OFFSET, SOURCE_PARTITION, SOURCE_TOPIC
from app.pipeline.steps import StepContext
from app.sink.collector import RecordCollector

# Headers of a repartition record (stripped again before the tail).
ORIGIN = "__eos.rp.origin"  # JSON [topic, partition, offset] of the input record
KEY = "__eos.rp.key"  # the row's key (packed), when it is not the record key
ROUTE = "__eos.rp.route"  # the row's output topic, when a head step routed it
_OURS = (ORIGIN, KEY, ROUTE)


class RepartitionError(RecordError):
    """A row cannot be written to the repartition topic (its key or value has no exact JSON
    form, e.g. an integer beyond 64 bits)."""


def pack(obj: Any) -> bytes:
    """Bytes that give ``obj`` back exactly (:func:`unpack`): bytes as they are, else JSON."""
    if isinstance(obj, bytes):
        return b"b" + obj
    if obj is None:
        return b"n"
    return b"j" + orjson.dumps(obj)


def unpack(data: bytes | None) -> Any:
    if not data or data[:1] == b"n":
        return None
    return data[1:] if data[:1] == b"b" else orjson.loads(data[1:])


class Regrouper:
    """Runs a :class:`Regroup` in the loop; one per bridge."""

    def __init__(self, plan: Regroup, collector: RecordCollector) -> None:
        self.plan = plan
        self._topic = plan.topic
        self._collector = collector
        # (partition, offset) of this batch's repartition records → their input record
        self._origins: dict[tuple[int, int], tuple[str, int, int]] = {}

    def split(self, messages: list[Message]) -> tuple[list[Message], list[Message]]:
        """The input messages (and consumer errors), and the repartition records."""
        topic = self._topic
        inputs: list[Message] = []
        hop: list[Message] = []
        self._origins = {}
        for m in messages:
            (inputs if m.error() is not None or m.topic() != topic else hop).append(m)
        return inputs, hop

    def decode(self, messages: list[Message]) -> tuple[list[Row], list[Failure]]:
        """Repartition records as the tail's rows (their origins noted for :meth:`restore`)."""
        return [self._row(m) for m in messages], []

    def source(self, message: Message) -> tuple[str, int, int]:
        """The input record a repartition record came from (itself, when it names none)."""
        where = (message.topic() or "", message.partition() or 0, message.offset() or 0)
        return self._origins.get((where[1], where[2]), where)

    def _row(self, m: Message) -> Row:
        ours: dict[str, bytes] = {}
        theirs: list[tuple[str, bytes]] = []
        for name, value in m.headers() or ():
            if name in _OURS:
                ours[name] = value
            else:
                theirs.append((name, value))
        key = unpack(ours[KEY]) if KEY in ours else unpack(m.key())
        raw = m.value() or b"n"
        partition, offset = m.partition(), m.offset()
        # raw (what a dead letter holds): the head's value as written, without its tag
        value, timestamp = unpack(raw), m.timestamp()[1]
        row = Row(value, key, theirs or None, self._topic, partition, offset, timestamp, raw[1:])
        if ROUTE in ours:
            row.topic = ours[ROUTE].decode()
        if ORIGIN in ours:
            src, p, o = orjson.loads(ours[ORIGIN])
            self._origins[(partition, offset)] = (src, p, o)
        return row

    def forward(self, rows: list[Row], ctx: StepContext) -> None:
        """Produce the head's rows to the repartition topic (a row whose key or value has no
        exact form there becomes a failure of the step ``repartition``)."""
        send, topic, by = self._collector.send, self._topic, self.plan.by
        for row in rows:
            try:
                state_key = row.key if by is None else by(row)
                headers = list(row.headers or ())
                headers.append(
                    (ORIGIN, orjson.dumps([row.source_topic, row.partition, row.offset]))
                )
                if by is not None:
                    headers.append((KEY, pack(row.key)))
                if row.topic is not None:
                    headers.append((ROUTE, str(row.topic).encode()))
                value = pack(row.value)
                key = pack(state_key)
            except (TypeError, ValueError, KeyError) as exc:
                error = RepartitionError(f"cannot be written to {topic}: {exc}")
                ctx.failures.append(Failure(row, "repartition", error))
                continue
            send(topic, value, key, headers, -1, row.timestamp)
        self._collector.end_batch()

    def restore(self, rows: list[Row], failures: list[Failure]) -> None:
        """Give each tail row (output or failed) the input record it came from."""
        topic, origins = self._topic, self._origins
        for row in [*rows, *(f.row for f in failures)]:
            if row.source_topic != topic:
                continue
            origin = origins.get((row.partition, row.offset))
            if origin is None:
                continue
            value = row.value
            if type(value) is dict and value.get(SOURCE_TOPIC) == topic:
                value[SOURCE_TOPIC], value[SOURCE_PARTITION], value[SOURCE_OFFSET] = origin
            row.source_topic, row.partition, row.offset = origin
