"""Pipeline steps and the declarative spec, without a broker."""

from __future__ import annotations

from typing import Any

import pytest

from app.errors import ConfigError
from app.pipeline import Pipeline, Row, StepContext
from app.pipeline.spec import compile_spec


def rows(*values: Any) -> list[Row]:
    return [Row(v, None, None, "in", 0, i, 1000 + i, b"raw") for i, v in enumerate(values)]


def run(p: Pipeline, batch: list[Row], retries: int = 1) -> tuple[list[Row], StepContext]:
    ctx = StepContext(retries=retries)
    for step in p.steps:
        batch = step(batch, ctx)
    return batch, ctx


def test_builder_filter_map_key_route() -> None:
    p = (
        Pipeline()
        .filter(lambda v: v["n"] % 2 == 0)
        .map(lambda v: {**v, "sq": v["n"] ** 2})
        .key_by(lambda v: f"k{v['n']}")
        .route(lambda v: "big" if v["sq"] > 10 else None)
    )
    out, ctx = run(p, rows(*({"n": n} for n in range(6))))
    assert [r.value["sq"] for r in out] == [0, 4, 16]
    assert [r.key for r in out] == ["k0", "k2", "k4"]
    assert [r.topic for r in out] == [None, None, "big"]
    assert ctx.failures == []


def test_poison_record_is_isolated_after_retries() -> None:
    calls: dict[int, int] = {}

    def fn(v: dict[str, int]) -> dict[str, int]:
        calls[v["n"]] = calls.get(v["n"], 0) + 1
        if v["n"] == 3:
            raise ValueError("boom")
        return {"n": v["n"] * 10}

    out, ctx = run(Pipeline().map(fn), rows(*({"n": n} for n in range(5))), retries=2)
    assert [r.value["n"] for r in out] == [0, 10, 20, 40]  # neighbours unaffected, in order
    assert len(ctx.failures) == 1
    assert ctx.failures[0].row.offset == 3
    assert isinstance(ctx.failures[0].error, ValueError)
    assert calls[3] == 1 + 3  # fast path once, then 1 + 2 retries


def test_map_none_drops_and_list_fans_out() -> None:
    p = Pipeline().map(lambda v: None if v == 0 else [v, v])
    out, _ = run(p, rows(0, 1, 2))
    assert [(r.value, r.offset) for r in out] == [(1, 1), (1, 1), (2, 2), (2, 2)]


def test_spec_compiles_to_same_results_as_builder() -> None:
    spec = {
        "steps": [
            {"filter": "amount > 0"},
            {"set": {"cents": "int(amount * 100)"}},
            {"drop": ["debug"]},
            {"key_by": "user"},
            {"route": "'large' if cents > 1000 else None"},
        ]
    }
    values = [
        {"user": "a", "amount": 5, "debug": 1},
        {"user": "b", "amount": -1, "debug": 1},
        {"user": "c", "amount": 20.5, "debug": 1},
    ]
    out, ctx = run(compile_spec(spec), rows(*values))
    assert [r.value for r in out] == [
        {"user": "a", "amount": 5, "cents": 500},
        {"user": "c", "amount": 20.5, "cents": 2050},
    ]
    assert [r.key for r in out] == ["a", "c"]
    assert [r.topic for r in out] == [None, "large"]
    assert ctx.failures == []


def test_spec_expression_sees_key_headers_and_offset() -> None:
    spec = {"steps": [{"set": {"origin": "topic + ':' + str(offset) + ':' + headers['h']"}}]}
    batch = [Row({"a": 1}, b"k", [("h", b"v")], "in", 0, 42, 0, b"raw")]
    out, _ = run(compile_spec(spec), batch)
    assert out[0].value["origin"] == "in:42:v"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"steps": [{"filter": "amount >"}]}, "invalid expression 'amount >'"),
        ({"steps": [{"explode": "x"}]}, "unknown step 'explode'"),
        ({"steps": [{"map": []}]}, "expected a mapping of field: expression"),
        ({"nope": 1}, "expected a mapping with a 'steps' list"),
    ],
)
def test_spec_errors_are_config_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_spec(spec)


def test_unsafe_expression_is_refused_when_the_spec_is_compiled() -> None:
    with pytest.raises(ConfigError, match=r"steps\[0\]\.filter: .*'__import__' is not allowed"):
        compile_spec({"steps": [{"filter": "__import__('os')"}]})


def test_failing_expression_fails_per_record_not_the_process() -> None:
    out, ctx = run(compile_spec({"steps": [{"filter": "a > 1"}]}), rows({"a": 2}, {"b": 1}))
    assert [r.value for r in out] == [{"a": 2}]
    assert [f.row.offset for f in ctx.failures] == [1]


def test_a_filter_result_whose_truth_value_raises_fails_only_its_record() -> None:
    class Ambiguous:
        def __bool__(self) -> bool:
            raise ValueError("truth value is ambiguous")

    p = Pipeline().filter(lambda v: Ambiguous() if v == 2 else v > 0)
    out, ctx = run(p, rows(1, 2, 3))
    assert [r.value for r in out] == [1, 3]
    assert [(f.row.value, type(f.error).__name__) for f in ctx.failures] == [(2, "ValueError")]
