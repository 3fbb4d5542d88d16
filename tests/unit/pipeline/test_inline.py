"""One-expression Python steps inlined into the fused loop (app.pipeline.inline): what is
inlined, what is not, and that the fused output still equals the general path's."""

from __future__ import annotations

import functools
from typing import Any

from app.pipeline import Pipeline
from app.pipeline.fusion import SpecPart, _may_make_non_finite
from app.pipeline.inline import finite_by_construction, inline
from app.pipeline.steps import fuse
from app.serde import formats
from tests.unit.pipeline.test_fused_path import JSON, Msg, drive, general_path, messages

LIMIT = 3


def keep(value: dict[str, Any]) -> bool:
    """A docstring is allowed."""
    return bool(value["amount"] >= 5)


def enrich(value: dict[str, Any]) -> dict[str, Any]:
    return {"id": value["id"], "cents": int(value["amount"] * 100), "tag": "x"}


def ratio(value: dict[str, Any]) -> dict[str, Any]:
    return {"id": value["id"], "r": value["amount"] / (value["id"] - 7)}


def huge(value: dict[str, Any]) -> dict[str, Any]:
    return {"id": value["id"], "x": value["amount"] * 1e308 * 10}


def uses_global(value: dict[str, Any]) -> bool:
    return bool(value["amount"] > LIMIT)


def two_statements(value: dict[str, Any]) -> bool:
    amount = value["amount"]
    return bool(amount > 3)


def with_default(value: dict[str, Any], limit: int = 3) -> bool:
    return bool(value["amount"] > limit)


def comprehension(value: dict[str, Any]) -> dict[str, Any]:
    return {k: x for k, x in value.items()}


def shadowing(value: dict[str, Any]) -> bool:
    return bool(value["amount"] > 3)


def len(value: Any) -> int:  # shadows the builtin in this module, on purpose
    return 0


def uses_shadowed(value: dict[str, Any]) -> int:
    return len(value)


@functools.lru_cache
def cached(value: Any) -> Any:
    return value


def make_closure() -> Any:
    limit = 3

    def closure(value: dict[str, Any]) -> bool:
        return bool(value["amount"] > limit)

    return closure


def test_a_one_expression_function_is_inlined_over_v() -> None:
    done = inline(keep)
    assert done is not None
    assert done.code == "(B_bool(v['amount'] >= 5))"
    assert done.names == {"B_bool": bool}
    mapped = inline(enrich)
    assert mapped is not None and finite_by_construction(mapped.tree)


def test_what_cannot_be_inlined_keeps_its_call() -> None:
    for fn in (uses_global, two_statements, with_default, comprehension, uses_shadowed,
               make_closure(), cached, lambda v: v["amount"] > 3, print):  # fmt: skip
        assert inline(fn) is None, fn


def test_a_map_that_computes_floats_keeps_the_non_finite_check() -> None:
    part = [SpecPart("call_map", huge, "map")]
    assert _may_make_non_finite(part, JSON)
    assert not _may_make_non_finite([SpecPart("call_map", enrich, "map")], JSON)
    assert _may_make_non_finite([SpecPart("call_map", enrich, "map")], formats("bytes"))
    assert _may_make_non_finite([SpecPart("call_map", lambda v: v, "map")], JSON)


def test_inlined_steps_give_the_general_paths_output() -> None:
    pipeline = Pipeline().filter(keep).map(enrich)
    batch = messages(200)
    fused = fuse(pipeline.steps, JSON, 1_000_000)
    assert fused is not None
    done, out = drive(fused, batch)
    assert done == 200
    assert [(value, key) for _, value, key, _ in out] == general_path(pipeline, batch)


def test_an_inlined_step_that_raises_or_makes_inf_stops_at_that_record() -> None:
    for pipeline in (Pipeline().map(ratio), Pipeline().map(huge).filter(shadowing)):
        batch = [Msg(b'{"id": %d, "amount": 4}' % i) for i in range(10)]
        fused = fuse(pipeline.steps, JSON, 1000)
        assert fused is not None
        done, out = drive(fused, batch)
        stop = 7 if pipeline.steps[0].fn is ratio else 0  # type: ignore[attr-defined]
        assert done == stop
        assert [(value, key) for _, value, key, _ in out] == general_path(pipeline, batch[:stop])
