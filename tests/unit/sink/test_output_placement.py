"""Where the output puts a record (app.sink.output): the output topic of its input topic
(``output_topic`` a template), its input partition (``keep_partition``), its input's timestamp
and headers; on the general path and on the fused one (app.pipeline.fusion), alike."""

from __future__ import annotations

from typing import Any

from app.engine.loop import by_partition, run_fused
from app.pipeline.builder import Pipeline
from app.pipeline.record import Row
from app.pipeline.steps import fuse
from app.serde import formats
from app.sink.collector import RecordCollector
from app.sink.output import Output
from tests.unit.fakes import FakeMessage, produce_keywords

HEADERS = [("trace", b"t-1"), ("eos.dlq.error.class", b"kept: not a replay")]
Placed = tuple[str, Any, Any, int, int, Any]  # topic, value, key, partition, timestamp, headers


class Recorder:
    """A producer that keeps where each record went."""

    def __init__(self) -> None:
        self.placed: list[Placed] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, *a: Any, **kw: Any) -> None:
        kw = {**produce_keywords(a), **kw}
        self.placed.append(
            (topic, value, key, kw.get("partition", -1), kw.get("timestamp", 0), kw.get("headers"))
        )

    def poll(self, _timeout: float = 0) -> int:
        return 0


class Message(FakeMessage):
    def __init__(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        super().__init__(topic, partition, offset, value, b"k%d" % offset)

    def headers(self) -> Any:
        return HEADERS

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self.offset())


def output(keep: bool, producer: Recorder, fmt: str = "json") -> Output:
    return Output(
        RecordCollector(producer), {"a": "eu.a", "b": "eu.b"}, "g.dlq", 10_000,
        {"side"}.__contains__, keep_partition=keep,
        value_codec=formats(fmt, fmt).value_out,
    )  # fmt: skip


def batch(value: bytes | None = b'{"n":1}') -> list[Message]:
    return [Message(t, p, o, value) for o in range(3) for t, p in (("a", 2), ("b", 0))]


def general(out: Output, messages: list[Message], fmt: str = "json") -> None:
    decode = formats(fmt, fmt).value_in.decode
    rows = [
        Row(decode(m.value(), m.topic()), m.key(), m.headers(), m.topic(), m.partition(),
            m.offset(), m.timestamp()[1], m.value())
        for m in messages
    ]  # fmt: skip
    assert out.send(rows) == []


def fused(out: Output, messages: list[Message], fmt: str = "json") -> None:
    steps = Pipeline().filter(lambda v: True).steps if fmt == "json" else []
    run = fuse(steps, formats(fmt, fmt), out.fast_path_max_bytes, out.topic_exists)
    assert run is not None
    for group in by_partition(list(messages)).values():  # as the loop does, per input topic
        assert run_fused(out, run, group) == len(group)


def expected(keep: bool, value: bytes | None = b'{"n":1}') -> list[Placed]:
    return sorted(
        (f"eu.{m.topic()}", value, m.key(), m.partition() if keep else -1, m.timestamp()[1],
         HEADERS)
        for m in batch(value)
    )  # fmt: skip


def test_each_input_topic_to_its_output_in_its_partition_with_its_timestamp_and_headers() -> None:
    for keep in (True, False):
        for path in (general, fused):
            producer = Recorder()
            path(output(keep, producer), batch())
            assert sorted(producer.placed) == expected(keep), (keep, path.__name__)


def test_a_routed_record_is_placed_by_its_key() -> None:
    producer = Recorder()
    row = Row({"n": 1}, b"k", None, "a", 2, 0, 5, b"{}")
    row.topic = "side"
    assert output(True, producer).send([row]) == []
    assert producer.placed == [("side", b'{"n":1}', b"k", -1, 5, None)]


def test_a_bytes_passthrough_copies_each_record_as_it_is_tombstones_included() -> None:
    for value in (b"\x00raw\xff", None):
        for path in (general, fused):
            producer = Recorder()
            path(output(True, producer, "bytes"), batch(value), "bytes")
            assert sorted(producer.placed) == expected(True, value), (value, path.__name__)


def test_the_passthrough_is_fused_only_for_plain_bytes() -> None:
    raw = formats("bytes", "bytes")
    assert fuse([], raw, 1000) is not None
    assert fuse(Pipeline().map(lambda v: v).steps, raw, 1000) is None
    assert fuse([], formats("bytes", "json"), 1000) is None
