"""Output: every row it cannot write faithfully comes back as a Failure with its own error
class; nothing raises, nothing is written as null, and each input is dead-lettered once."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import orjson
import pytest

from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline.record import Failure, Row
from app.serde.json import has_non_finite
from app.sink.collector import RecordCollector
from app.sink.deadletters import DeadLetters
from app.sink.output import H_CLASS, H_STEP, Output
from tests.unit.fakes import produce_keywords


class FakeProducer:
    """Records what is produced; the one seam Output uses."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes | None, bytes | None, Any]] = []

    def produce(self, topic: str, value: Any, key: Any = None, *args: Any, **kw: Any) -> None:
        self.produced.append((topic, value, key, {**produce_keywords(args), **kw}.get("headers")))

    def poll(self, _timeout: float) -> int:
        return 0


def make_output(existing: set[str] | None = None) -> tuple[Output, FakeProducer, DeadLetters]:
    producer = FakeProducer()
    dead_letters = DeadLetters(Metrics(), Health(30))
    topics = existing if existing is not None else {"side"}
    output = Output(
        RecordCollector(producer),
        "out",
        "dlq",
        10_000,
        topics.__contains__,
        1_000_000,
        dead_letters,
    )
    return output, producer, dead_letters


def row(value: Any, offset: int = 0, key: Any = b"k", topic: Any = None) -> Row:
    r = Row(value, key, None, "in", 0, offset, 0, b"raw")
    r.topic = topic
    return r


BAD = [
    ({"cents": 10**22}, b"k", None, "output", "OutputNotEncodable"),  # int(1e20 * 100)
    ({"n": -(2**63) - 1}, b"k", None, "output", "OutputNotEncodable"),
    ({"ratio": float("nan")}, b"k", None, "output", "OutputNotEncodable"),
    ({"deep": [1, {"x": float("-inf")}]}, b"k", None, "output", "OutputNotEncodable"),
    (float("inf"), b"k", None, "output", "OutputNotEncodable"),  # a bare number
    ({1: "non-string key"}, b"k", None, "output", "OutputNotEncodable"),
    ({"s": {1, 2}}, b"k", None, "output", "OutputNotEncodable"),  # a set
    ("\ud800", b"k", None, "output", "OutputNotEncodable"),  # lone surrogate, str value
    ({"a": 1}, "\udfff", None, "output", "OutputNotEncodable"),  # ... in the key
    ({"pad": "x" * 20_000}, b"k", None, "output", "OutputTooLarge"),
    ({"a": 1}, b"k", 42, "route", "InvalidRoute"),
    ({"a": 1}, b"k", "", "route", "InvalidRoute"),
    ({"a": 1}, b"k", ["side"], "route", "InvalidRoute"),
    ({"a": 1}, b"k", "no-such-topic", "route", "UnknownRouteTopic"),
]


@pytest.mark.parametrize(("value", "key", "topic", "step", "cls"), BAD)
def test_each_bad_output_is_a_failure_of_its_class(
    value: Any, key: Any, topic: Any, step: str, cls: str
) -> None:
    output, producer, _ = make_output()
    good = [row({"i": i, "maybe": None}, offset=i) for i in range(3)]
    bad = row(value, offset=9, key=key, topic=topic)
    failures = output.send([good[0], bad, *good[1:]])
    assert [(f.row.offset, f.step, type(f.error).__name__) for f in failures] == [(9, step, cls)]
    assert [orjson.loads(v or b"")["i"] for _, v, _, _ in producer.produced] == [0, 1, 2]


def test_nulls_numbers_and_routes_that_are_fine_are_written() -> None:
    output, producer, _ = make_output()

    class Topics(StrEnum):
        SIDE = "side"

    rows = [
        row({"none": None, "text": "null", "big": 2**64 - 1, "float": 1e308}),
        row([None, -(2**63)], topic="side"),
        row("plain text"),
        row(None),  # a tombstone
        row({"a": 1}, topic=Topics.SIDE),
    ]
    assert output.send(rows) == []
    assert [t for t, *_ in producer.produced] == ["out", "side", "out", "out", "side"]
    assert producer.produced[3][1] is None


def test_non_finite_search_only_flags_nan_and_inf() -> None:
    assert not has_non_finite({"a": [1, 2.5, None, "nan", {"b": -1e308}]})
    assert has_non_finite({"a": [1, (2, float("nan"))]})
    assert has_non_finite([{"x": float("inf")}])


def test_dead_letters_carry_their_class_once_per_input_and_transaction() -> None:
    output, producer, dead_letters = make_output()
    fanned = [row({"n": float("nan")}, offset=5), row({"n": float("inf")}, offset=5)]
    failures = output.send(fanned)
    assert len(failures) == 2  # two outputs of one input...
    for failure in failures:
        output.dead_letter(failure)
    assert len(producer.produced) == 1  # ...one dead letter
    _, value, _, headers = producer.produced[0]
    assert value == b"raw"
    assert dict(headers)[H_CLASS] == b"OutputNotEncodable"
    assert dict(headers)[H_STEP] == b"output"
    output.reset()  # aborted: the replay writes it again
    output.dead_letter(failures[0])
    assert len(producer.produced) == 2
    output.checkpoint_committed(1)
    assert dead_letters.tripped is False


def test_a_dead_letter_whose_key_cannot_be_encoded_is_still_written() -> None:
    output, producer, _ = make_output()
    bad = row({"a": 1}, key="\udfff")
    (failure,) = output.send([bad])
    output.dead_letter(failure)
    assert producer.produced[0][2] == b"\\udfff"
    output.dead_letter(Failure(row({}, offset=1, key=object()), "x", ValueError("\ud800")))
    assert dict(producer.produced[1][3])["eos.dlq.error.message"] == b"\\ud800"


def test_a_replayed_dead_letter_loses_its_error_headers_on_output_and_keeps_them_as_history() -> (
    None
):
    producer = FakeProducer()
    output = Output(RecordCollector(producer), "out", "dlq", 10_000, lambda t: True, replaying=True)
    earlier = [
        ("trace", b"t"),
        ("eos.dlq.error.class", b"KeyError"),
        ("eos.dlq.source.offset", b"3"),
    ]
    good = Row({"n": 1}, b"k", list(earlier), "dlq", 0, 0, 0, b'{"n": 1}')
    assert output.send([good]) == []
    assert producer.produced[0][3] == [("trace", b"t")]
    bad = Row({"n": float("nan")}, b"k", list(earlier), "dlq", 0, 1, 0, b"raw")
    (failure,) = output.send([bad])
    output.dead_letter(failure)
    headers = producer.produced[1][3]
    assert ("eos.dlq.history.error.class", b"KeyError") in headers
    assert ("eos.dlq.history.source.offset", b"3") in headers
    assert dict(headers)["eos.dlq.error.class"] == b"OutputNotEncodable"
    assert dict(headers)["eos.dlq.source.offset"] == b"1" and ("trace", b"t") in headers
