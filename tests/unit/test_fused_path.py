"""The fused fast path (app.pipeline.steps.fuse) against the general Row path."""

from __future__ import annotations

from typing import Any

import orjson

from app.pipeline import Pipeline
from app.pipeline.record import Row
from app.pipeline.stateful import Count
from app.pipeline.steps import StepContext, fuse


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
    fused = fuse(pipeline.steps, True, 1_000_000)
    assert fused is not None
    encoded = fused(batch)
    assert encoded is not None
    assert [(payload, key) for payload, key, *_ in encoded] == general_path(pipeline, batch)


def test_anything_unusual_takes_the_general_path() -> None:
    def boom(v: Any) -> Any:
        if v["id"] == 7:
            raise ValueError("bad record")
        return v

    cases = [
        (Pipeline().map(boom), messages(10)),  # a raising step
        (Pipeline().map(lambda v: [v, v]), messages(3)),  # fan-out
        (Pipeline().map(lambda v: "text"), messages(3)),  # not a dict
        (Pipeline().map(lambda v: v), [*messages(3), Msg(b"not json")]),  # undecodable
        (Pipeline().map(lambda v: {"pad": "x" * 200}), messages(3)),  # over max_bytes
        (Pipeline().map(lambda v: {**v, "c": v["id"] * 10**20}), messages(3)),  # > 64 bits
        (Pipeline().map(lambda v: {**v, "r": [float("nan")]}), messages(3)),  # NaN → null
    ]
    for pipeline, batch in cases:
        fused = fuse(pipeline.steps, True, 100)
        assert fused is not None
        assert fused(batch) is None


def test_no_fast_path_for_keying_routing_state_or_bytes_input() -> None:
    assert fuse(Pipeline().key_by(lambda v: v["id"]).steps, True, 1000) is None
    assert fuse(Pipeline().route(lambda v: "t").steps, True, 1000) is None
    assert fuse(Pipeline().then(Count()).steps, True, 1000) is None
    assert fuse(Pipeline().map(lambda v: v).steps, False, 1000) is None


def test_a_null_that_is_really_null_stays_on_the_fast_path() -> None:
    fused = fuse(Pipeline().map(lambda v: {**v, "none": None, "s": "null"}).steps, True, 1000)
    assert fused is not None
    encoded = fused(messages(3))
    assert encoded is not None and len(encoded) == 3
