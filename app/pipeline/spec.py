"""Declarative pipelines: a YAML/JSON spec compiled to the same steps as the Python API.

::

    steps:
      - filter: "amount > 0"
      - map: {id: id, user: user, cents: "int(amount * 100)"}   # project to these fields
      - set: {big: "amount > 100"}                               # add/replace fields
      - drop: [debug]                                            # remove fields
      - rename: {user: customer}                                 # rename fields in place
      - key_by: customer
      - route: "'payments-big' if big else None"                 # None = output_topic

Stateful steps (``dedupe``, ``count``, ``sum``, ``window``) compile in
:mod:`app.pipeline.stateful.compilers`. A step without options may be written bare
(``- count``); every form, next to its Python twin, is in docs/pipelines.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.errors import ConfigError
from app.pipeline.builder import Pipeline
from app.pipeline.errors import USER_ERRORS
from app.pipeline.expressions import ROW_META, fields_code, row_expression, row_function
from app.pipeline.fusion import SpecPart
from app.pipeline.record import Row
from app.pipeline.rename import rename_step
from app.pipeline.stateful.compilers import STATEFUL_COMPILERS, StepCompiler
from app.pipeline.steps import Apply, Filter, Step, StepContext
from app.settings_checks import yaml_problem

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
        except USER_ERRORS:
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
        except USER_ERRORS:
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
    """``key_by: <expression>``, or ``key_by: {by: <expression>, repartition: false}`` (or
    ``partitions: N``: of the repartition topic, default the inputs' largest count)."""
    again, n = True, None
    if isinstance(arg, dict) and set(arg) <= {"by", "repartition", "partitions"} and "by" in arg:
        again, n, arg = arg.get("repartition", True) is not False, arg.get("partitions"), arg["by"]
    expr = row_expression(_source(arg, where), where)
    part = SpecPart("key_by", arg, where)
    return _RowApply(
        expr, target="key", name=where, repartition=again, partitions=n, spec_part=part
    )


@step_compiler("route")
def _route(arg: Any, where: str) -> Step:
    expr = row_expression(_source(arg, where), where)
    return _RowApply(expr, target="topic", name=where, spec_part=SpecPart("route", arg, where))


@step_compiler("rename")
def _rename(arg: Any, where: str) -> Step:
    try:
        return rename_step(arg, name=where)
    except ConfigError as exc:
        raise ConfigError(f"pipeline spec {exc}") from None


# How each step is written, for the messages that show the right form.
STEP_FORMS = {
    "filter": '- filter: "amount > 0"',
    "map": '- map: {id: id, cents: "int(amount * 100)"}',
    "set": '- set: {cents: "int(amount * 100)"}',
    "drop": "- drop: [debug, internal]",
    "rename": "- rename: {user: customer}",
    "key_by": "- key_by: user",
    "route": "- route: \"'big' if amount > 100 else None\"",
    "dedupe": "- dedupe: {by: id, ttl: 3600, name: dedupe}",
    "count": "- count: {name: clicks-per-user}",
    "sum": "- sum: {field: amount, name: spend}",
    "window": "- window: {size: 60, timestamp: ts, aggregate: count, name: per-minute}",
}


def compile_spec(spec: Any, source: str = "spec") -> Pipeline:
    """Compile a parsed spec (``{"steps": [...]}``) into a :class:`Pipeline`."""
    if not isinstance(spec, dict) or not isinstance(spec.get("steps"), list):
        raise ConfigError(f"pipeline spec {source}: expected a mapping with a 'steps' list")
    pipeline = Pipeline()
    for i, item in enumerate(spec["steps"]):
        where = f"{source} steps[{i}]"
        kind, arg = _step_item(item, where)
        compiler = STEP_COMPILERS.get(kind)
        if compiler is None:
            known = ", ".join(sorted(STEP_COMPILERS))
            raise ConfigError(f"pipeline spec {where}: unknown step {kind!r} (known: {known})")
        try:
            pipeline.then(compiler(arg, f"{where}.{kind}"))
        except ConfigError as exc:
            if not isinstance(item, str):
                raise
            raise ConfigError(f"{exc}; write it as `{STEP_FORMS.get(kind, kind)}`") from None
    return pipeline


def _step_item(item: Any, where: str) -> tuple[str, Any]:
    """``(kind, options)`` of one entry of ``steps``: a one-key mapping, or a bare step name
    (``- count``: the step with its default options)."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, dict) and len(item) == 1:
        ((kind, arg),) = item.items()
        return str(kind), arg
    keys = sorted(map(str, item)) if isinstance(item, dict) else []
    steps = [k for k in keys if k in STEP_COMPILERS]
    hint = f"e.g. `{STEP_FORMS[steps[0]]}`" if steps else "e.g. `- count: {name: clicks}`"
    got = f"got the keys {keys}" if keys else f"got {item!r}"
    extra = " (are the options indented under the step?)" if len(steps) == 1 else ""
    raise ConfigError(
        f"pipeline spec {where}: each step is a one-key mapping, {hint}; {got}{extra}"
    )


def load_spec(path: Path) -> Pipeline:
    """Read a YAML/JSON spec file and compile it."""
    try:
        spec = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"pipeline_spec {path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"pipeline_spec {yaml_problem(path, exc)}") from None
    return compile_spec(spec, str(path))
