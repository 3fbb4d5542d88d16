"""The ``rename`` step in both forms, on both paths; bare step names (``- count``) in a spec
and the messages that show the right form (issue 32, scope 4)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml

from app.errors import ConfigError
from app.pipeline import Pipeline, Row, StepContext
from app.pipeline.rename import Renamer
from app.pipeline.spec import STEP_COMPILERS, STEP_FORMS, compile_spec
from app.pipeline.stateful import Count, Dedupe
from app.pipeline.steps import fuse
from app.serde import formats
from tests.unit.pipeline.test_fused_path import Msg, drive


def general(pipeline: Pipeline, values: list[Any]) -> tuple[list[Any], list[tuple[int, str]]]:
    """Output values of the Row path and its failures as (offset, error class)."""
    rows = [Row(v, b"k", None, "in", 0, i, 0, b"") for i, v in enumerate(values)]
    ctx = StepContext(retries=0)
    for step in pipeline.steps:
        rows = step(rows, ctx)
    return [r.value for r in rows], [(f.row.offset, type(f.error).__name__) for f in ctx.failures]


def spec(text: str) -> Pipeline:
    return compile_spec(yaml.safe_load(text))


# ---- rename ------------------------------------------------------------------------------------


def test_rename_keeps_the_position_replaces_a_field_of_the_new_name_and_swaps() -> None:
    assert Renamer((("a", "x"),))({"a": 1, "b": 2}) == {"x": 1, "b": 2}
    assert list(Renamer((("a", "x"),))({"a": 1, "b": 2})) == ["x", "b"]
    assert Renamer((("a", "b"),))({"a": 1, "b": 2}) == {"b": 1}
    assert Renamer((("a", "b"), ("b", "a")))({"a": 1, "b": 2, "c": 3}) == {"b": 1, "a": 2, "c": 3}


def test_the_spec_and_the_python_form_build_the_same_step() -> None:
    yaml_step = spec("steps:\n  - rename: {user: customer, amount: amount_eur}\n").steps[0]
    python_step = Pipeline().rename(user="customer", amount="amount_eur").steps[0]
    mapping_step = Pipeline().rename({"user": "customer"}, amount="amount_eur").steps[0]
    assert yaml_step.fn == python_step.fn == mapping_step.fn  # type: ignore[attr-defined]
    assert yaml_step.name == "spec steps[0].rename" and python_step.name == "rename"


def test_a_missing_field_or_a_non_object_is_a_dead_letter_naming_it() -> None:
    pipeline = spec("steps:\n  - rename: {user: customer}\n")
    values = [{"user": "ana"}, {"usr": "bo"}, [1, 2], {"user": "cy"}]
    out, failed = general(pipeline, values)
    assert out == [{"customer": "ana"}, {"customer": "cy"}]
    assert failed == [(1, "KeyError"), (2, "TypeError")]
    with pytest.raises(KeyError, match="'user' is not in the value"):
        pipeline.steps[0].fn({"usr": "bo"})  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("arg", "match"),
    [
        ("{}", "expected a mapping of old field name: new field name"),
        ("[user]", "expected a mapping"),
        ("{user: ''}", "non-empty strings"),
        ("{1: one}", "non-empty strings, got 1: 'one'"),
        ("{a: x, b: x}", "several fields renamed to 'x'"),
    ],
)
def test_bad_renames_are_config_errors_naming_the_step(arg: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        spec(f"steps:\n  - rename: {arg}\n")
    assert str(caught.value).startswith("pipeline spec spec steps[0].rename: ")


def test_python_rename_without_names_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="rename: expected a mapping"):
        Pipeline().rename()


def test_rename_takes_the_fused_path_with_the_same_outputs() -> None:
    pipeline = spec(
        "steps:\n"
        '  - filter: "amount > 0"\n'
        "  - rename: {amount: amount_eur, user: customer}\n"
        '  - set: {cents: "int(amount_eur * 100)"}\n'
    )
    values = [{"user": f"u{i}", "amount": i % 4, "id": i} for i in range(40)]
    run = fuse(pipeline.steps, formats(), 1_000_000)
    assert run is not None, "rename must not take a pipeline off the fused path"
    done, produced = drive(run, [Msg(orjson.dumps(v), b"k", i) for i, v in enumerate(values)])
    assert done == len(values)
    expected, failed = general(pipeline, values)
    assert not failed
    assert [orjson.loads(payload) for _, payload, _, _ in produced] == expected
    assert [p[1] for p in produced] == [orjson.dumps(v) for v in expected]  # same field order


def test_a_record_rename_cannot_handle_leaves_the_fused_path_at_that_record() -> None:
    pipeline = Pipeline().rename(user="customer")
    values = [{"user": "a"}, {"user": "b"}, {"nobody": 1}, {"user": "c"}]
    run = fuse(pipeline.steps, formats(), 1_000_000)
    assert run is not None
    done, produced = drive(run, [Msg(orjson.dumps(v), b"k", i) for i, v in enumerate(values)])
    assert done == 2 and len(produced) == 2
    out, failed = general(pipeline, values[done:])
    assert out == [{"customer": "c"}] and failed == [(0, "KeyError")]


# ---- bare step names and the right form in messages ---------------------------------------------


def test_a_bare_count_or_dedupe_is_the_step_with_its_defaults() -> None:
    pipeline = spec("steps:\n  - key_by: user\n  - dedupe\n  - count\n")
    assert pipeline.steps[1] == Dedupe()
    assert pipeline.steps[2] == Count(name="count")


@pytest.mark.parametrize("step", ["filter", "map", "set", "drop", "rename", "key_by", "route",
                                  "sum", "window"])  # fmt: skip
def test_a_bare_step_that_needs_options_shows_its_form(step: str) -> None:
    with pytest.raises(ConfigError) as caught:
        spec(f"steps:\n  - {step}\n")
    message = str(caught.value)
    assert message.startswith(f"pipeline spec spec steps[0].{step}: ")
    assert message.endswith(f"write it as `{STEP_FORMS[step]}`")


def test_options_not_indented_under_their_step_get_a_hint() -> None:
    with pytest.raises(ConfigError) as caught:
        spec("steps:\n  - count:\n    name: clicks\n")  # `name` beside `count`, not under it
    assert str(caught.value) == (
        "pipeline spec spec steps[0]: each step is a one-key mapping, e.g. "
        "`- count: {name: clicks-per-user}`; got the keys ['count', 'name'] "
        "(are the options indented under the step?)"
    )


def test_every_documented_form_compiles() -> None:
    assert set(STEP_FORMS) == set(STEP_COMPILERS)
    for step, form in STEP_FORMS.items():
        pipeline = spec(f"steps:\n  {form}\n")
        assert len(pipeline.steps) == 1, step


# ---- check-config's one line ------------------------------------------------------------------


def test_describe_counts_the_stateful_steps_not_all_steps() -> None:
    assert Pipeline().describe() == "passthrough pipeline"
    assert spec("steps:\n  - filter: 'x > 0'\n  - key_by: user\n").describe() == (
        "pipeline of 2 stateless step(s)"
    )
    five = spec(
        "steps:\n  - filter: 'x > 0'\n  - set: {y: x}\n  - rename: {y: z}\n  - key_by: user\n"
        "  - count: {name: clicks}\n"
    )
    assert five.describe() == "pipeline of 5 step(s), 1 stateful: 'clicks'"
    two = Pipeline().dedupe(name="once").window(60).aggregate("count")
    assert two.describe() == "pipeline of 2 step(s), 2 stateful: 'once', 'window'"
