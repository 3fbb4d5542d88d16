"""The spec expression compiler: hostile expressions, equivalence with Python, isolation."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.loop import run_fused
from app.errors import ConfigError, ExpressionLimit
from app.pipeline import Pipeline, Row, StepContext
from app.pipeline.spec import compile_spec, load_spec
from app.pipeline.stateful import Count
from app.pipeline.steps import fuse
from app.serde import formats
from app.sink.collector import RecordCollector
from app.sink.output import Output
from bench.pipelines import p1, p3
from tests.unit.pipeline.test_fused_path import Msg, drive

JSON, RAW = formats(), formats("bytes")


def rows(*values: Any) -> list[Row]:
    return [
        Row(v, b"k", [("h", b"hv")], "in", 0, i, 1000 + i, b"raw") for i, v in enumerate(values)
    ]


def run(p: Pipeline, batch: list[Row]) -> tuple[list[Row], StepContext]:
    ctx = StepContext(retries=1)
    for step in p.steps:
        batch = step(batch, ctx)
    return batch, ctx


def spec(*steps: dict[str, Any]) -> Pipeline:
    return compile_spec({"steps": list(steps)})


def general(p: Pipeline, values: list[Any]) -> list[tuple[bytes, Any]]:
    """Outputs of the Row path, encoded as the fused path encodes them."""
    out, ctx = run(p, [Row(v, b"k", None, "in", 0, i, 0, b"") for i, v in enumerate(values)])
    assert not ctx.failures
    keys = [r.key if r.key is None or type(r.key) is bytes else str(r.key).encode() for r in out]
    return [(orjson.dumps(r.value), k) for r, k in zip(out, keys, strict=True)]


@functools.cache
def compiled(p: Pipeline) -> Any:
    """The fused path of ``p``, compiled once (the loop, too, compiles it once and runs it on
    every batch; a compile is most of a property test example's time)."""
    run_batch = fuse(p.steps, JSON, 1_000_000)
    assert run_batch is not None
    return run_batch


def fused(p: Pipeline, values: list[Any]) -> tuple[int, list[tuple[bytes, Any]]]:
    """How many records the fused path handled, and its outputs."""
    run_batch = compiled(p)
    done, out = drive(run_batch, [Msg(orjson.dumps(v), b"k", i) for i, v in enumerate(values)])
    return done, [(payload, key) for _, payload, key, _ in out]


# ---- hostile expressions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("9**9**9", "over a limit"),
        ("4000000**4000000", "over a limit"),
        ("'x' * 10**10", "over a limit"),
        ("[0] * 10**10", "over a limit"),
        ("1 << 10**6", "over a limit"),
        ("f'{1:>999999999}'", "over a limit"),
        ("'%999999999d' % 1", "over a limit"),
        ("'a'.ljust(10**10)", "is not allowed"),
        ("value.__class__", "attribute access"),
        ("__import__('os')", "'__import__' is not allowed"),
        ("open('/etc/passwd')", "'open' is not allowed"),
        ("__builtins__", "dunder names"),
        ("lambda: 1", "Lambda is not allowed"),
        ("(x := 1)", "NamedExpr is not allowed"),
        ("{x for x in items}", "SetComp is not allowed"),
        ("len(*items)", "not allowed"),
        ("1e308 * 10", "is inf"),
        ("1 / 0", "ZeroDivisionError"),
        ("amount >", "invalid expression"),
    ],
)
def test_hostile_expression_is_refused_at_compile_time(expression: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as caught:
        spec({"set": {"out": expression}})
    message = str(caught.value)
    assert message.startswith("pipeline spec spec steps[0].set.out: ")
    assert "\n" not in message


_4M = 4_000_000  # 4000000**4000000: ~30 s of CPU in simpleeval, which passed it


@pytest.mark.parametrize(
    ("expression", "benign", "hostile", "error"),
    [
        ("amount ** n", {"amount": 3, "n": 4}, {"amount": _4M, "n": _4M}, ExpressionLimit),
        ("s * n", {"s": "x", "n": 3}, {"s": "x", "n": 10**10}, ExpressionLimit),
        ("[0] * n", {"n": 3}, {"n": 10**10}, ExpressionLimit),
        ("s + s", {"s": "ab"}, {"s": "x" * 60_000}, ExpressionLimit),
        ("1 << n", {"n": 3}, {"n": 10**9}, ExpressionLimit),
        ("f'{s:>{n}}'", {"s": "x", "n": 3}, {"s": "x", "n": 10**9}, ExpressionLimit),
        ("s % 1", {"s": "%d"}, {"s": "%999999999d"}, ExpressionLimit),
        ("[a for a in l for b in l for c in l]", {"l": [1, 2]}, {"l": list(range(100))},
         ExpressionLimit),
        ("[s * 100_000 for c in l]", {"s": "x", "l": [1]}, {"s": "x", "l": [1] * 20},
         ExpressionLimit),
        ("[[str(value)] for c in l]", {"l": [1]}, {"l": [1] * 100, "pad": "x" * 50_000},
         ExpressionLimit),
        ("float(s) * 2", {"s": "1.5"}, {"s": "inf"}, ExpressionLimit),
        ("n or float(s)", {"n": 0, "s": "1.5"}, {"n": 0, "s": "nan"}, ExpressionLimit),
        ("amount * 1e308", {"amount": 1.5}, {"amount": 10.0}, ExpressionLimit),
        ("int(float(s))", {"s": "1.5"}, {"s": "inf"}, OverflowError),
    ],
)  # fmt: skip
def test_hostile_operands_dead_letter_the_record_only(
    expression: str, benign: dict[str, Any], hostile: dict[str, Any], error: type[Exception]
) -> None:
    pipeline = spec({"set": {"out": expression}})
    out, ctx = run(pipeline, rows(benign, hostile, benign))
    assert [r.offset for r in out] == [0, 2]  # the neighbours go on
    assert [(f.row.offset, type(f.error)) for f in ctx.failures] == [(1, error)]
    # The fast path stops at the hostile record and hands it (and the rest) over.
    assert fused(pipeline, [benign, hostile, benign]) == (1, general(pipeline, [benign]))


def test_comprehensions_within_the_budget_work() -> None:
    out, ctx = run(spec({"set": {"sq": "[x * x for x in l if x > 1]"}}), rows({"l": [1, 2, 3]}))
    assert not ctx.failures
    assert out[0].value["sq"] == [4, 9]


# ---- same results as the Python form ---------------------------------------------------------

_README_SPEC = spec(
    {"filter": "kind != 'refund'"},
    {"set": {"cents": "int(amount * 100)"}},
    {"drop": ["debug"]},
    {"key_by": "user"},
)
_README_PYTHON = (
    Pipeline()
    .filter(lambda v: v["kind"] != "refund")
    .map(lambda v: {**v, "cents": int(v["amount"] * 100)})
    .map(lambda v: {k: x for k, x in v.items() if k != "debug"})
    .key_by(lambda v: v["user"])
)
_BENCH_P1_SPEC = load_spec(Path(__file__).resolve().parents[3] / "bench" / "specs" / "p1.yaml")

_amounts = st.one_of(
    st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
)
_records = st.fixed_dictionaries(
    {
        "id": st.text(max_size=8),
        "user": st.text(max_size=8),
        "amount": _amounts,
        "kind": st.sampled_from(["sale", "refund"]),
        "country": st.sampled_from(["DE", "FR"]),
        "ts": st.integers(0, 2**40),
        "debug": st.booleans(),
    }
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_records, max_size=20))
def test_spec_equals_python_form_on_random_records(values: list[dict[str, Any]]) -> None:
    for spec_form, python_form in ((_README_SPEC, _README_PYTHON), (_BENCH_P1_SPEC, p1)):
        expected = general(python_form, values)
        assert general(spec_form, values) == expected
        assert fused(spec_form, values) == (len(values), expected)
    assert fused(p1, values) == (len(values), general(p1, values))  # key_by(fn): no fast path


def test_fused_spec_sees_the_same_metadata_as_the_row_path() -> None:
    pipeline = spec(
        {"key_by": "user + '-' + str(offset)"},
        {"set": {"k": "key", "t": "topic", "p": "partition", "h": "headers", "ts": "timestamp"}},
    )
    values = [{"user": "a", "l": [0, 1], "n": 4}, {"user": "b", "l": [], "n": 2}]
    assert fused(pipeline, values) == (len(values), general(pipeline, values))
    shapes = spec({"set": {"c": "{str(x): [x] * 2 for x in l if x}", "f": "f'{user!r:>{n}}'"}})
    assert fused(shapes, values) == (len(values), general(shapes, values))
    assert orjson.loads(general(shapes, values)[0][0])["f"] == " 'a'"


def test_route_and_stateful_steps_keep_the_general_path() -> None:
    # A route fuses only with the topic catalog to check its topics against (see below).
    assert fuse(spec({"route": "'t' if amount > 1 else None"}).steps, JSON, 1000) is None
    assert fuse([*spec({"filter": "amount > 1"}).steps, Count()], JSON, 1000) is None
    assert fuse(spec({"filter": "amount > 1"}).steps, RAW, 1000) is None


# ---- route, fused: same topics, and bad routes left to the general path's dead letters -------

_EXISTING = {"big", "small"}
_ROUTED = spec(
    {"filter": "kind != 'refund'"},
    {"route": "target if amount > 0 else None"},
    {"set": {"seen": "topic"}},
    {"route": "target if amount > 100 else None"},  # a later route wins, as on the Row path
    {"key_by": "user"},
)
_targets = st.one_of(
    st.sampled_from([*_EXISTING, "missing", "", None]), st.integers(0, 3), st.lists(st.text())
)


class _Recorder:
    """A producer that keeps what Output produces: (topic, value, key)."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes, Any]] = []

    def produce(self, topic: str, value: bytes, key: Any = None, *_: Any, **__: Any) -> None:
        self.produced.append((topic, value, key))

    def poll(self, _timeout: float) -> int:
        return 0


def _output(producer: _Recorder) -> Output:
    return Output(RecordCollector(producer), "out", "dlq", 1_000_000, _EXISTING.__contains__)


_ROUTED_FUSED = fuse(_ROUTED.steps, JSON, 1_000_000, _EXISTING.__contains__)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_records, _targets).map(lambda r: {**r[0], "target": r[1]}), max_size=12))
def test_fused_route_equals_the_row_path(values: list[dict[str, Any]]) -> None:
    general_out = _Recorder()
    batch, ctx = run(
        _ROUTED, [Row(v, b"k", None, "in", 0, i, 0, b"") for i, v in enumerate(values)]
    )
    assert not ctx.failures
    failures = _output(general_out).send(batch)
    assert {f.step for f in failures} <= {"route"}  # InvalidRoute, UnknownRouteTopic
    # As the loop does it: the fast path up to the first record it cannot route, the general
    # path from there on.
    assert _ROUTED_FUSED is not None
    fused_out = _Recorder()
    output = _output(fused_out)
    done = run_fused(
        output, _ROUTED_FUSED, [Msg(orjson.dumps(v), b"k", i) for i, v in enumerate(values)]
    )
    assert done == min([f.row.offset for f in failures], default=len(values))
    rest, ctx = run(
        _ROUTED, [Row(v, b"k", None, "in", 0, i, 0, b"") for i, v in enumerate(values) if i >= done]
    )
    assert not ctx.failures
    rest_failures = output.send(rest)
    assert fused_out.produced == general_out.produced
    assert [(f.row.offset, f.step) for f in rest_failures] == [
        (f.row.offset, f.step) for f in failures
    ]


def test_fused_route_falls_back_on_each_kind_of_bad_route() -> None:
    run_batch = fuse(spec({"route": "target"}).steps, JSON, 1000, _EXISTING.__contains__)
    assert run_batch is not None
    good = Msg(b'{"target": "big"}')
    assert drive(run_batch, [good]) == (1, [("big", b'{"target":"big"}', b"k", None)])
    for bad in (b'"missing"', b'""', b"1", b'["big"]'):  # unknown topic, empty, not a string
        assert drive(run_batch, [good, Msg(b'{"target": ' + bad + b"}"), good])[0] == 1


# ---- no expression sees another's result or changes the input ---------------------------------


def test_expressions_see_the_input_value_not_each_others_results() -> None:
    original = {"amount": 5, "items": [1, 2]}
    pipeline = spec(
        {"set": {"amount": "amount * 2", "before": "amount", "items": "items + [3]"}},
        {"map": {"doubled": "amount", "was": "before", "items": "items", "first": "value"}},
    )
    out, ctx = run(pipeline, rows(original))
    assert not ctx.failures
    assert out[0].value["doubled"] == 10
    assert out[0].value["was"] == 5  # computed from the input of the set step
    assert out[0].value["items"] == [1, 2, 3]
    assert out[0].value["first"]["amount"] == 10  # ``value`` is the map step's input
    assert original == {"amount": 5, "items": [1, 2]}  # the input record is untouched


def test_the_documented_example_compiles_and_runs() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "expressions.md").read_text()
    example = yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0])
    record = {"kind": "sale", "amount": 1500.5, "id": "r1", "user": "u", "tags": ["a", ""]}
    out, ctx = run(compile_spec(example), rows(record))
    assert not ctx.failures
    assert out[0].value == {"id": "r1", "user": "u", "cents": 150050, "tags": ["a"]}
    assert (out[0].key, out[0].topic) == ("u", "payments-large")


def test_fused_spec_leaves_large_outputs_and_non_objects_to_the_general_path() -> None:
    too_large = fuse(spec({"set": {"pad": "'x' * 200"}}).steps, JSON, 100)
    assert too_large is not None
    assert drive(too_large, [Msg(b'{"a": 1}')]) == (0, [])
    filter_only = fuse(spec({"filter": "value != 0"}).steps, JSON, 100)
    assert filter_only is not None
    assert drive(filter_only, [Msg(b"5")]) == (0, [])  # a number: Output encodes it, not here
    assert drive(filter_only, [Msg(b'{"a": 1}')]) == (1, [("out", b'{"a":1}', b"k", None)])


@pytest.mark.parametrize("expression", ["-" * 100_000 + "1", "[" * 200 + "]" * 200, "a\x00b"])
def test_absurd_expressions_are_config_errors_not_crashes(expression: str) -> None:
    with pytest.raises(ConfigError, match=r"^pipeline spec spec steps\[0\]\.set"):
        spec({"set": {"out": expression}})


class _Producer:
    """The producer calls Output.send makes."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes]] = []

    def produce(self, topic: str, value: bytes, key: Any = None, *_: Any, **__: Any) -> None:
        self.produced.append((topic, value))

    def poll(self, _timeout: float) -> int:
        return 0


def test_results_json_cannot_carry_fail_their_record_at_output() -> None:
    pipeline = spec({"set": {"cents": "int(amount * 1e20)", "tags": "set(tags)"}})
    batch, ctx = run(pipeline, rows({"amount": 1.0, "tags": []}, {"amount": 0.0, "tags": []}))
    assert not ctx.failures  # Python computes both; JSON cannot carry the first
    producer = _Producer()
    output = Output(RecordCollector(producer), "out", "dlq", 1_000_000, lambda topic: True)
    failures = output.send(batch)
    assert [(f.row.offset, f.step) for f in failures] == [(0, "output"), (1, "output")]
    assert producer.produced == []


def test_a_plain_field_in_a_stateful_step_is_the_python_forms_field_name() -> None:
    """``aggregate: {sum: amount}`` builds the very step of ``.aggregate("sum", of="amount")``;
    an expression stays a compiled function."""
    bench_p3 = load_spec(Path(__file__).resolve().parents[3] / "bench" / "specs" / "p3.yaml")
    assert repr(bench_p3.steps) == repr(p3.steps)
    doubled = spec({"window": {"size": 10, "aggregate": {"sum": "amount * 2"}}})
    assert "RowFn" in repr(doubled.steps[0])
    meta = spec({"window": {"size": 10, "aggregate": {"sum": "offset"}}})
    assert "RowFn" in repr(meta.steps[0])  # metadata, not a field of the value
