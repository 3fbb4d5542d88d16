"""Integers beyond 64 bits are never rewritten (issue 51, scope 7): orjson decodes them as
floats; a passthrough writes its input's bytes as they are, and a pipeline whose output would
hold such a rewritten number dead-letters it as OutputNotEncodable, on the general path and
on the fused one alike (app.serde.json, app.sink.output, app.pipeline.fusion)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.errors import OutputNotEncodable
from app.pipeline.record import Row
from app.pipeline.spec import compile_spec
from app.pipeline.steps import StepContext, fuse
from app.serde import formats
from app.serde.json import long_number_in, rewritten
from app.sink.collector import RecordCollector
from app.sink.output import Output
from tests.unit.fakes import FakeMessage

BEYOND = [2**64 + 1, 10**30 + 1, -(2**63) - 1]
WITHIN = [2**64 - 1, -(2**63), 1234567890123456789, 0]


class _Recorder:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    def produce(self, topic: str, value: Any = None, *a: Any, **kw: Any) -> None:
        self.values.append(value)

    def poll(self, _timeout: float = 0) -> int:
        return 0


def _raw(n: int) -> bytes:
    return b'{"id": 7, "n": %d}' % n


@pytest.mark.parametrize("n", BEYOND)
def test_orjson_rewrites_it_and_the_input_says_so(n: int) -> None:
    value = orjson.loads(_raw(n))
    assert type(value["n"]) is float  # the loss this guards against
    assert long_number_in(_raw(n))
    assert rewritten(orjson.dumps(value), value, _raw(n))


@pytest.mark.parametrize("n", WITHIN)
def test_integers_orjson_holds_exactly_are_not_suspects(n: int) -> None:
    value = orjson.loads(_raw(n))
    assert value["n"] == n and type(value["n"]) is int
    assert not rewritten(orjson.dumps(value), value, _raw(n))
    assert long_number_in(_raw(n)) == (len(str(n)) >= 20)  # 2**64 - 1, -2**63: a closer look


def test_a_big_float_of_the_input_is_no_rewritten_integer() -> None:
    raw = b'{"x": 1e20, "note": "a+b 123456789012345678901"}'
    value = orjson.loads(raw)
    assert not rewritten(orjson.dumps(value), value, b'{"x": 1e20}')
    assert rewritten(orjson.dumps(value), value, raw)  # a 21-digit string: a closer look only


def _messages() -> list[FakeMessage]:
    return [FakeMessage(offset=i, value=_raw(n), key=b"k") for i, n in enumerate(BEYOND + WITHIN)]


def test_a_passthrough_writes_the_input_bytes_as_they_are() -> None:
    run = fuse([], formats(), 1_000_000)
    assert run is not None
    produced: list[bytes] = []
    done, _ = run(_messages(), lambda t, v, *a: produced.append(v), None, "out")  # type: ignore[arg-type]
    assert done == len(BEYOND + WITHIN)
    assert produced == [m.value() for m in _messages()]


def _output(recorder: _Recorder) -> Output:
    return Output(RecordCollector(recorder), "out", "dlq", 100_000, lambda t: True)  # type: ignore[arg-type]


def test_a_set_step_dead_letters_a_rewritten_integer_on_both_paths() -> None:
    pipeline = compile_spec({"steps": [{"set": {"m": "n", "id2": "id * 2"}}]})
    run = fuse(pipeline.steps, formats(), 1_000_000)
    assert run is not None
    messages = _messages()
    done, _ = run(messages, lambda *a: None, None, "out")  # type: ignore[arg-type]
    assert done == 0  # the first record (2**64 + 1) leaves the rest to the general path
    recorder = _Recorder()
    rows = [Row(orjson.loads(m.value()), m.key(), None, "in", 0, m.offset(), 0, m.value())
            for m in messages]  # fmt: skip
    ctx = StepContext(retries=0)
    for step in pipeline.steps:
        rows = step(rows, ctx)
    failures = _output(recorder).send(rows)
    assert ctx.failures == []
    assert [f.row.offset for f in failures] == [0, 1, 2]
    assert all(type(f.error) is OutputNotEncodable for f in failures)
    assert [orjson.loads(v)["m"] for v in recorder.values] == WITHIN


def test_an_expression_on_a_python_int_beyond_64_bits_does_not_crash() -> None:
    pipeline = compile_spec({"steps": [{"set": {"m": "n + 1", "big": "n > 5"}}]})
    rows = [Row({"n": n}, None, None, "in", 0, i, 0, b"") for i, n in enumerate(BEYOND)]
    ctx = StepContext(retries=0)
    for step in pipeline.steps:
        rows = step(rows, ctx)
    assert [r.value["m"] for r in rows] == [n + 1 for n in BEYOND] and ctx.failures == []
    failures = _output(_Recorder()).send(rows)
    assert [type(f.error) for f in failures] == [OutputNotEncodable] * 3
