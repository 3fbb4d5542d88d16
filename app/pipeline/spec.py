"""Declarative pipelines: a YAML/JSON spec compiled to the same steps as the Python API.

::

    steps:
      - filter: "amount > 0"
      - map: {id: id, user: user, cents: "int(amount * 100)"}   # project to these fields
      - set: {big: "amount > 100"}                               # add/replace fields
      - drop: [debug]                                            # remove fields
      - key_by: user
      - route: "'payments-big' if big else None"                 # None = output_topic

Stateful steps (``dedupe``, ``count``, ``sum``, ``window``) compile in
:mod:`app.pipeline.stateful.compilers`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.errors import ConfigError
from app.pipeline.builder import Pipeline
from app.pipeline.expressions import ROW_META, fields_code, row_expression, row_function
from app.pipeline.fusion import SpecPart
from app.pipeline.record import Row
from app.pipeline.stateful.compilers import STATEFUL_COMPILERS, StepCompiler
from app.pipeline.steps import Apply, Filter, Step, StepContext

STEP_COMPILERS: dict[str, StepCompiler] = dict(STATEFUL_COMPILERS)


def step_compiler(name: str) -> Callable[[StepCompiler], StepCompiler]:
    """Register a compiler for spec steps called ``name``."""

    def register(fn: StepCompiler) -> StepCompiler:
        STEP_COMPILERS[name] = fn
        return fn

    return register


@dataclass(slots=True)
class _RowFilter(Filter):
    """A filter whose predicate sees the whole row (expressions need key/headers).

    Like :class:`Filter`, the whole batch first; one row at a time (retries, dead letters)
    only when a row raises. Compiled expressions have no side effects: running one again is
    harmless.
    """

    spec_part: SpecPart | None = None

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        pred = self.predicate
        try:
            return [r for r in rows if pred(r)]
        except Exception:
            kept = []
            for r in rows:
                ok, keep = ctx.guarded(self.name, r, pred)
                if ok and keep:
                    kept.append(r)
            return kept


@dataclass(slots=True)
class _RowApply(Apply):
    """An apply whose function sees the whole row (batch first, like :class:`_RowFilter`)."""

    spec_part: SpecPart | None = None

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        fn = self.fn
        try:
            results = [fn(r) for r in rows]  # computed before any row changes
        except Exception:
            results, done = [], []
            for r in rows:
                ok, result = ctx.guarded(self.name, r, fn)
                if ok:
                    results.append(result)
                    done.append(r)
            return self.assign(done, results)
        return self.assign(rows, results)


def _source(arg: Any, where: str) -> str:
    if not isinstance(arg, str):
        raise ConfigError(f"pipeline spec {where}: expected an expression string, got {arg!r}")
    return arg


def _fields(arg: Any, where: str) -> dict[str, str]:
    if not isinstance(arg, dict) or not arg:
        raise ConfigError(f"pipeline spec {where}: expected a mapping of field: expression")
    return {str(k): str(v) for k, v in arg.items()}


@step_compiler("filter")
def _filter(arg: Any, where: str) -> Step:
    expr = row_expression(_source(arg, where), where, finite=False)
    return _RowFilter(expr, name=where, spec_part=SpecPart("filter", arg, where))


def _fields_step(kind: str, arg: Any, where: str) -> Step:
    fields = _fields(arg, where)
    done = fields_code(fields, where, ROW_META, keep=kind == "set")
    fn = row_function(done.code, done.uses_budget, where)
    return _RowApply(fn, name=where, spec_part=SpecPart(kind, fields, where))


@step_compiler("map")
def _map(arg: Any, where: str) -> Step:
    return _fields_step("map", arg, where)


@step_compiler("set")
def _set(arg: Any, where: str) -> Step:
    return _fields_step("set", arg, where)


@step_compiler("drop")
def _drop(arg: Any, where: str) -> Step:
    if not isinstance(arg, list) or not all(isinstance(f, str) for f in arg):
        raise ConfigError(f"pipeline spec {where}: expected a list of field names")
    gone = frozenset(arg)
    return _RowApply(
        lambda row: {k: v for k, v in row.value.items() if k not in gone},
        name=where,
        spec_part=SpecPart("drop", gone, where),
    )


@step_compiler("key_by")
def _key_by(arg: Any, where: str) -> Step:
    expr = row_expression(_source(arg, where), where)
    return _RowApply(expr, target="key", name=where, spec_part=SpecPart("key_by", arg, where))


@step_compiler("route")
def _route(arg: Any, where: str) -> Step:
    expr = row_expression(_source(arg, where), where)
    return _RowApply(expr, target="topic", name=where, spec_part=SpecPart("route", arg, where))


def compile_spec(spec: Any, source: str = "spec") -> Pipeline:
    """Compile a parsed spec (``{"steps": [...]}``) into a :class:`Pipeline`."""
    if not isinstance(spec, dict) or not isinstance(spec.get("steps"), list):
        raise ConfigError(f"pipeline spec {source}: expected a mapping with a 'steps' list")
    pipeline = Pipeline()
    for i, item in enumerate(spec["steps"]):
        where = f"{source} steps[{i}]"
        if not isinstance(item, dict) or len(item) != 1:
            raise ConfigError(f"pipeline spec {where}: each step is a one-key mapping")
        ((kind, arg),) = item.items()
        compiler = STEP_COMPILERS.get(kind)
        if compiler is None:
            known = ", ".join(sorted(STEP_COMPILERS))
            raise ConfigError(f"pipeline spec {where}: unknown step {kind!r} (known: {known})")
        pipeline.then(compiler(arg, f"{where}.{kind}"))
    return pipeline


def load_spec(path: Path) -> Pipeline:
    """Read a YAML/JSON spec file and compile it."""
    try:
        spec = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"pipeline_spec {path}: cannot read: {exc}") from None
    return compile_spec(spec, str(path))
