"""Spec compilers of the stateful steps: ``dedupe``, ``count``, ``sum`` and ``window``.

:mod:`app.pipeline.spec` merges :data:`STATEFUL_COMPILERS` into its own table, so this module
needs nothing from the spec compiler (no import cycle, no registration by import side effect).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.errors import ConfigError
from app.pipeline.expressions import ROW_META, row_expression, translate
from app.pipeline.stateful.event_time import DEFAULT_MAX_EVENT_TIME_SKEW
from app.pipeline.stateful.keyed import Count, Dedupe, Sum
from app.pipeline.stateful.kit import RowFn
from app.pipeline.stateful.windows import window
from app.pipeline.steps import Step

StepCompiler = Callable[[Any, str], Step]


def _options(
    arg: Any, where: str, allowed: set[str], shorthand: str | None = None
) -> dict[str, Any]:
    if arg is None:
        return {}
    if shorthand is not None and not isinstance(arg, dict):
        return {shorthand: arg}
    if not isinstance(arg, dict):
        raise ConfigError(f"pipeline spec {where}: expected a mapping with {sorted(allowed)}")
    unknown = set(arg) - allowed
    if unknown:
        raise ConfigError(
            f"pipeline spec {where}: unknown option(s) {sorted(unknown)} (known: {sorted(allowed)})"
        )
    return arg


def _row_expr(source: Any, where: str) -> RowFn | str:
    """The compiled expression; a plain field reference (``amount``) becomes the field name,
    so the step is the very one the Python form builds (``of="amount"``)."""
    if not isinstance(source, str):
        raise ConfigError(f"pipeline spec {where}: expected an expression string, got {source!r}")
    name = source.strip()
    if translate(name, where, ROW_META, finite=True).code == f"v[{name!r}]":
        return name
    return RowFn(row_expression(source, where))


def _located(where: str, build: Callable[[], Step]) -> Step:
    """Build a step; a ConfigError from its checks gets the spec location in front."""
    try:
        return build()
    except ConfigError as exc:
        raise ConfigError(f"pipeline spec {where}: {exc}") from None


def _name(opts: dict[str, Any], default: str, where: str) -> str:
    name = opts.get("name", default)
    if not isinstance(name, str):
        raise ConfigError(f"pipeline spec {where}.name: expected a string, got {name!r}")
    return name


def _dedupe_spec(arg: Any, where: str) -> Step:
    """``dedupe: {by: <expression, default key>, ttl: <seconds, default forever>, name,
    max_event_time_skew: <seconds, default min(one day, ttl)>, repartition, partitions}``."""
    opts = _options(
        arg, where, {"by", "ttl", "name", "repartition", "partitions", "max_event_time_skew"}
    )
    by = _row_expr(opts["by"], f"{where}.by") if "by" in opts else None
    name, again = _name(opts, "dedupe", where), opts.get("repartition", True) is not False
    n, skew = opts.get("partitions"), opts.get("max_event_time_skew")
    return _located(
        where,
        lambda: Dedupe(
            ttl=opts.get("ttl"),
            by=by,
            name=name,
            max_event_time_skew=skew,
            repartition=again,
            partitions=n,
        ),
    )


def _count_spec(arg: Any, where: str) -> Step:
    """``count: {name}`` (or ``count: null``): count per key."""
    opts = _options(arg, where, {"name"})
    return Count(name=_name(opts, "count", where))


def _sum_spec(arg: Any, where: str) -> Step:
    """``sum: <expression>`` or ``sum: {field: <expression>, name}``: sum per key."""
    opts = _options(arg, where, {"field", "name"}, shorthand="field")
    if "field" not in opts:
        raise ConfigError(f"pipeline spec {where}: 'field' (an expression) is required")
    return Sum(of=_row_expr(opts["field"], f"{where}.field"), name=_name(opts, "sum", where))


_WINDOW_OPTIONS = {"size", "hop", "grace", "timestamp", "aggregate", "name"}
_WINDOW_OPTIONS |= {"max_event_time_skew", "late_records"}  # event_time.py


def _aggregates(aggregate: Any, where: str) -> tuple[Any, Any]:
    """``count``, ``{kind: <expr>}`` (one: the row's ``value``), or several — ``{kind: <expr>,
    ...}`` or a list of ``count`` / ``{kind: <expr>}`` — as ``(kind, of)`` parts (the row's
    ``count`` and a field per part)."""
    if isinstance(aggregate, dict) and len(aggregate) == 1:
        ((kind, source),) = aggregate.items()
        return kind, _row_expr(source, f"{where}.{kind}")
    if isinstance(aggregate, dict) and aggregate:
        aggregate = [kind if kind == "count" else {kind: src} for kind, src in aggregate.items()]
    if isinstance(aggregate, list) and aggregate:
        parts: list[tuple[Any, Any]] = []
        for i, item in enumerate(aggregate):
            if item == "count":
                parts.append(("count", None))
            elif isinstance(item, dict) and len(item) == 1:
                ((kind, source),) = item.items()
                parts.append((kind, _row_expr(source, f"{where}[{i}].{kind}")))
            else:
                raise ConfigError(f"pipeline spec {where}[{i}]: expected count or {{sum: <expr>}}")
        return parts, None
    if not isinstance(aggregate, str):
        raise ConfigError(f"pipeline spec {where}: expected count or {{sum: <expr>}}")
    return aggregate, None


def _window_spec(arg: Any, where: str) -> Step:
    """``window: {size, hop, grace, timestamp: <expr, ms>, aggregate: count | {sum: <expr>} |
    several, name, max_event_time_skew, late_records: drop | dlq}`` — times in seconds;
    aggregates count, sum, min, max, mean (:func:`_aggregates`)."""
    opts = _options(arg, where, _WINDOW_OPTIONS)
    kind, of = _aggregates(opts.get("aggregate", "count"), f"{where}.aggregate")
    ts = _row_expr(opts["timestamp"], f"{where}.timestamp") if "timestamp" in opts else None
    size: Any = opts.get("size")  # validated (required, seconds) by window()
    name = _name(opts, "window", where)
    skew = opts.get("max_event_time_skew", DEFAULT_MAX_EVENT_TIME_SKEW)
    late = opts.get("late_records", "drop")
    return _located(
        where,
        lambda: window(
            size, opts.get("hop"), opts.get("grace", 0.0), kind, of, ts, name, skew, late
        ),
    )


STATEFUL_COMPILERS: dict[str, StepCompiler] = {
    "dedupe": _dedupe_spec,
    "count": _count_spec,
    "sum": _sum_spec,
    "window": _window_spec,
}
