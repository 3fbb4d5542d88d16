"""Routes that cannot work (app.sink.output): to an internal ``__*`` topic, to an input topic
or to the DLQ a record is ``InvalidRoute`` (a dead letter), on the general path and the fused
one alike; a route to any other existing topic is written."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.loop import by_partition, run_fused
from app.pipeline.errors import InvalidRoute
from app.pipeline.record import Row
from app.pipeline.spec import compile_spec
from app.pipeline.steps import fuse
from app.serde import formats
from app.sink.collector import RecordCollector
from app.sink.output import Output
from tests.unit.fakes import FakeMessage

EXISTING = {"side", "in", "out", "out.dlq", "__consumer_offsets", "__transaction_state"}


class Recorder:
    def __init__(self) -> None:
        self.topics: list[str] = []

    def produce(self, topic: str, *_a: Any, **_kw: Any) -> None:
        self.topics.append(topic)

    def poll(self, _timeout: float = 0) -> int:
        return 0


def make(producer: Recorder) -> Output:
    return Output(
        RecordCollector(producer), "out", "out.dlq", 10_000, EXISTING.__contains__,
        not_routable=["in"],
    )  # fmt: skip


BAD = ["__consumer_offsets", "__transaction_state", "in", "out.dlq"]


@pytest.mark.parametrize("topic", BAD)
def test_a_route_to_an_internal_input_or_dlq_topic_is_an_invalid_route(topic: str) -> None:
    producer = Recorder()
    row = Row({"n": 1}, None, None, "in", 0, 7, 1, b'{"n":1}')
    row.topic = topic
    failures = make(producer).send([row])
    assert [type(f.error) for f in failures] == [InvalidRoute]
    assert topic in str(failures[0].error)
    assert producer.topics == []


def test_a_route_to_another_existing_topic_is_written() -> None:
    producer = Recorder()
    row = Row({"n": 1}, None, None, "in", 0, 7, 1, b'{"n":1}')
    row.topic = "side"
    assert make(producer).send([row]) == []
    assert producer.topics == ["side"]


@pytest.mark.parametrize("topic", BAD)
def test_the_fused_path_leaves_a_bad_route_to_the_general_path(topic: str) -> None:
    producer = Recorder()
    out = make(producer)
    steps = compile_spec({"steps": [{"route": "to"}]}).steps
    run = fuse(steps, formats("json", "json"), out.fast_path_max_bytes, out.topic_exists)
    assert run is not None
    messages = [FakeMessage("in", 0, 0, b'{"to":"%s"}' % topic.encode(), None)]
    for group in by_partition(messages).values():
        assert run_fused(out, run, group) == 0  # not produced: the general path dead-letters it
    assert producer.topics == []
