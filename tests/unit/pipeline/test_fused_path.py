"""The fused fast path (app.pipeline.steps.fuse) against the general Row path: the same
outputs, and at the first record that needs the general path, a stop that leaves it and the
rest of the batch to it, with exactly the records before it produced."""

from __future__ import annotations

from typing import Any

import orjson

from app.pipeline import Pipeline
from app.pipeline.fusion import FusedBatch
from app.pipeline.record import Row
from app.pipeline.stateful import Count
from app.pipeline.steps import StepContext, fuse
from app.serde import formats

JSON, RAW = formats(), formats("bytes")


class Msg:
    """The parts of a confluent-kafka Message the loop reads."""

    def __init__(self, value: bytes, key: bytes | None = b"k", offset: int = 0) -> None:
        self._value, self._key, self._offset = value, key, offset

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> None:
        return None

    def topic(self) -> str:
        return "in"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


Produced = tuple[str, bytes, Any, Any]  # topic, value, key, headers


class Sink:
    """The producer side of a fused pipeline: records what it produced."""

    def __init__(self) -> None:
        self.records: list[Produced] = []
        self.placed: list[tuple[int, int]] = []  # partition, timestamp

    def produce(
        self, topic: str, value: bytes, key: Any, partition: int = -1, callback: Any = None,
        on_delivery: Any = None, timestamp: int = 0, headers: Any = None,
    ) -> None:  # fmt: skip
        self.records.append((topic, value, key, headers))
        self.placed.append((partition, timestamp))

    def room(self, topic: str, value: bytes, key: Any, headers: Any, *placed: int) -> None:
        raise AssertionError("no full queue in these tests")


def drive(fused: FusedBatch, batch: list[Any]) -> tuple[int, list[Produced]]:
    """How many messages ``fused`` handled, and what it produced (default topic "out")."""
    sink = Sink()
    done, produced = fused(batch, sink.produce, sink.room, "out")
    assert produced == len(sink.records)
    return done, sink.records


def general_path(pipeline: Pipeline, messages: list[Msg]) -> list[tuple[bytes, Any]]:
    rows = [
        Row(orjson.loads(m.value()), m.key(), None, "in", 0, m.offset(), 0, m.value())
        for m in messages
    ]
    ctx = StepContext()
    for step in pipeline.steps:
        rows = step(rows, ctx)
    assert not ctx.failures
    return [(orjson.dumps(r.value), r.key) for r in rows]


def messages(n: int) -> list[Msg]:
    return [
        Msg(orjson.dumps({"id": i, "amount": i % 10}), f"u{i % 3}".encode(), i) for i in range(n)
    ]


def test_fused_output_equals_the_general_path() -> None:
    pipeline = (
        Pipeline()
        .filter(lambda v: v["amount"] > 2)
        .map(lambda v: {**v, "cents": v["amount"] * 100})
        .map(lambda v: None if v["id"] % 5 == 0 else v)
    )
    batch = messages(200)
    fused = fuse(pipeline.steps, JSON, 1_000_000)
    assert fused is not None
    done, out = drive(fused, batch)
    assert done == 200
    assert [(value, key) for _, value, key, _ in out] == general_path(pipeline, batch)
    assert {(topic, headers) for topic, _, _, headers in out} == {("out", None)}


def test_anything_unusual_stops_the_fast_path_at_that_record() -> None:
    def boom(v: Any) -> Any:
        if v["id"] == 7:
            raise ValueError("bad record")
        return v

    class Failed(Msg):
        def error(self) -> Any:
            return "_TRANSPORT"

    cases = [
        (Pipeline().map(boom), 7),  # a raising step
        (Pipeline().map(lambda v: [v, v] if v["id"] == 7 else v), 7),  # fan-out
        (Pipeline().map(lambda v: "text" if v["id"] == 7 else v), 7),  # not a dict
        (Pipeline().map(lambda v: {"pad": "x" * 200} if v["id"] == 7 else v), 7),  # > max_bytes
        (Pipeline().map(lambda v: {**v, "c": v["id"] * 10**20}), 1),  # beyond 64 bits
        (Pipeline().map(lambda v: {**v, "r": [float("nan")] if v["id"] == 7 else []}), 7),
        (Pipeline().filter(lambda v: v["id"] != 7), 7),  # undecodable (below)
        (Pipeline().filter(lambda v: v["id"] != 7), 7),  # a consumer error (below)
    ]
    for n, (pipeline, stop) in enumerate(cases):
        batch = messages(10)
        if n == 6:
            batch[7] = Msg(b"not json")
        if n == 7:
            batch[7] = Failed(b"{}")
        fused = fuse(pipeline.steps, JSON, 100)
        assert fused is not None
        done, out = drive(fused, batch)
        assert done == stop, n
        assert [(value, key) for _, value, key, _ in out] == general_path(pipeline, batch[:stop])


def test_no_fast_path_for_state_or_bytes_input() -> None:
    assert fuse(Pipeline().key_by(lambda v: v["id"]).steps, JSON, 1000) is None
    assert fuse(Pipeline().route(lambda v: "t").steps, JSON, 1000) is None
    assert fuse(Pipeline().then(Count()).steps, JSON, 1000) is None
    assert fuse(Pipeline().map(lambda v: v).steps, RAW, 1000) is None


def test_a_null_that_is_really_null_stays_on_the_fast_path() -> None:
    fused = fuse(Pipeline().map(lambda v: {**v, "none": None, "s": "null"}).steps, JSON, 1000)
    assert fused is not None
    assert drive(fused, messages(3))[0] == 3


def test_the_fast_path_waits_for_room_in_a_full_queue() -> None:
    fused = fuse(Pipeline().filter(lambda v: True).steps, JSON, 1000)
    assert fused is not None
    tries: list[bytes] = []
    waited: list[Produced] = []

    def produce(topic: str, value: bytes, key: Any, *_: Any) -> None:
        tries.append(value)
        if len(tries) == 2:
            raise BufferError("Local: Queue full")

    def room(topic: str, value: bytes, key: Any, headers: Any, *placed: int) -> None:
        waited.append((topic, value, key, headers))

    batch = messages(3)
    assert fused(batch, produce, room, "out") == (3, 3)
    assert waited == [("out", batch[1].value(), b"u1", None)]
