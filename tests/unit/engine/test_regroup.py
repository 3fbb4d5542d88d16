"""The repartition hop's record format and provenance (app.engine.regroup), with fakes."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.regroup import Regrouper, pack, unpack
from app.pipeline import Pipeline, Row, StepContext
from app.pipeline.split import split


class _Message:
    def __init__(self, topic: str, partition: int, offset: int, sent: tuple[Any, ...]) -> None:
        _, self._value, self._key, self._headers, _, self._ts = sent
        self._topic, self._partition, self._offset = topic, partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key  # type: ignore[no-any-return]

    def value(self) -> bytes:
        return self._value  # type: ignore[no-any-return]

    def headers(self) -> Any:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)


class _Collector:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, *record: Any) -> None:
        self.sent.append(record)

    def end_batch(self) -> None:
        pass


@pytest.mark.parametrize("obj", [None, b"\x00raw", "s", 7, 1.5, {"a": [1, {"b": None}]}])
def test_pack_round_trips(obj: Any) -> None:
    assert unpack(pack(obj)) == obj


def _hop(pipeline: Pipeline) -> tuple[Regrouper, _Collector]:
    plan = split(pipeline.steps, "g")
    assert plan is not None
    collector = _Collector()
    return Regrouper(plan, collector), collector  # type: ignore[arg-type]


def test_a_hop_record_gives_the_tail_its_key_value_timestamp_and_origin() -> None:
    hop, collector = _hop(Pipeline().key_by(lambda v: v["region"]).count())
    row = Row({"region": "apac", "n": 1}, b"o1", [("h", b"1")], "orders", 2, 41, 1234)
    (row,) = hop.plan.head[0]([row], StepContext())  # the key_by
    hop.forward([row], StepContext())
    ((topic, _, key, _, partition, ts),) = collector.sent
    assert (topic, unpack(key), partition, ts) == ("g-key_by-repartition", "apac", -1, 1234)
    message = _Message(topic, 0, 9, collector.sent[0])
    inputs, hop_messages = hop.split([message])  # type: ignore[list-item]
    assert inputs == []
    rows, _ = hop.decode(hop_messages)
    assert hop.source(message) == ("orders", 2, 41)  # type: ignore[arg-type]
    (tail,) = rows
    assert (tail.value, tail.key, tail.headers, tail.timestamp) == (
        {"region": "apac", "n": 1},
        "apac",
        [("h", b"1")],
        1234,
    )
    assert (tail.source_topic, tail.partition, tail.offset) == (topic, 0, 9)  # state: the hop's
    out = tail.derive(
        {"key": "apac", "_source_topic": topic, "_source_partition": 0, "_source_offset": 9}
    )
    hop.restore([out], [])
    assert out.value == {
        "key": "apac",
        "_source_topic": "orders",
        "_source_partition": 2,
        "_source_offset": 41,
    }
    assert (out.source_topic, out.partition, out.offset) == ("orders", 2, 41)


def test_dedupe_by_a_field_is_keyed_by_it_and_keeps_the_record_key() -> None:
    hop, collector = _hop(Pipeline().dedupe(by="uid"))
    hop.forward([Row({"uid": "u1"}, b"k9", None, "in", 0, 0, 5)], StepContext())
    assert unpack(collector.sent[0][2]) == "u1"
    (tail,), _ = hop.decode([_Message("g-dedupe-repartition", 1, 0, collector.sent[0])])  # type: ignore[list-item]
    assert tail.key == b"k9"


def test_a_value_without_an_exact_form_is_a_failure_of_the_hop() -> None:
    hop, collector = _hop(Pipeline().key_by(lambda v: v["k"]).count())
    ctx = StepContext()
    hop.forward([Row({"k": "a", "n": 2**64 + 1}, None, None, "in", 0, 0, 0)], ctx)
    assert collector.sent == [] and [f.step for f in ctx.failures] == ["repartition"]
