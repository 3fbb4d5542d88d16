"""What every stateful step shares: value extractors, the state lookup, provenance fields."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import isfinite
from typing import Any

from app.errors import ConfigError
from app.pipeline.errors import (
    INT64_MAX,
    INT64_MIN,
    USER_ERRORS,
    AggregateOverflow,
    InvalidEventTime,
)
from app.pipeline.record import Failure, Row
from app.pipeline.steps import StepContext
from app.state.access import StateAccess, StateView
from app.state.keys import decode_int, display_key, encode_int

# Every output of a stateful step says which input record produced it.
SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET = (
    "_source_topic",
    "_source_partition",
    "_source_offset",
)

Extractor = Callable[[Row], Any]
STREAM_TIME_KEY = b"t"  # stream time of the partition (8 bytes)


@dataclass(slots=True, frozen=True)
class RowFn:
    """A function of the whole row (spec expressions see key, headers, timestamp...)."""

    fn: Callable[[Row], Any]


FieldSpec = str | RowFn | Callable[[Any], Any]


def extractor(spec: FieldSpec) -> Extractor:
    """A row → value function: a field name, a :class:`RowFn`, or a function of the value."""
    if isinstance(spec, str):
        name = spec
        return lambda row: row.value[name]
    if isinstance(spec, RowFn):
        return spec.fn
    fn = spec
    return lambda row: fn(row.value)


def require_state(ctx: StepContext, step: str) -> StateAccess:
    if ctx.state is None:
        raise ConfigError(f"pipeline step {step!r} keeps state but the bridge has no state backend")
    return ctx.state


class Views:
    """Per-batch lookup of the partition state a row belongs to (rows of one partition
    usually come in runs, so the last answer is kept at hand)."""

    __slots__ = ("_access", "_last", "_last_tp", "_store", "by_partition")

    def __init__(self, access: StateAccess, store: str) -> None:
        self._access = access
        self._store = store
        self.by_partition: dict[tuple[str, int], StateView] = {}
        self._last_tp: tuple[str, int] | None = None
        self._last: StateView | None = None

    def of(self, row: Row) -> StateView:
        tp = (row.source_topic, row.partition)
        if tp == self._last_tp and self._last is not None:
            return self._last
        view = self.by_partition.get(tp)
        if view is None:
            view = self.by_partition[tp] = self._access.partition(self._store, *tp)
        self._last_tp, self._last = tp, view
        return view


def extract_all(
    rows: list[Row], ctx: StepContext, step: str, fn: Callable[[Row], Any]
) -> list[Any]:
    """``fn(row)`` for every row, aligned with ``rows``; None where it failed for good.

    Fast path over the whole batch; on any exception, one row at a time with the context's
    bounded retries, so a bad record is dead-lettered without failing its neighbours.
    ``fn`` must not return None for a good row.
    """
    try:
        return [fn(row) for row in rows]
    except USER_ERRORS:
        results = []
        for row in rows:
            ok, result = ctx.guarded(step, row, fn)
            results.append(result if ok else None)
        return results


def provenance(row: Row) -> dict[str, Any]:
    """The output fields naming the input record an output came from."""
    return {
        SOURCE_TOPIC: row.source_topic,
        SOURCE_PARTITION: row.partition,
        SOURCE_OFFSET: row.offset,
    }


def number(value: Any, what: str) -> int | float:
    """``value`` if it is an int or float (not bool), else TypeError naming ``what``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise TypeError(f"{what} must be a number, got {type(value).__name__}: {value!r}")


# Times (event times, window bounds, ttls) in ms stay within ±2**62 so that sums of two of them
# still fit the signed 64-bit integers of the state keys (app.state.keys.encode_int).
MAX_MILLIS = 2**62


def out_of_range(total: int | float) -> bool:
    """True when an aggregate cannot be stored and emitted faithfully: an int outside signed
    64 bits, or a float that is NaN or ±inf (JSON would say null)."""
    return not INT64_MIN <= total <= INT64_MAX and (isinstance(total, int) or not isfinite(total))


def overflow(ctx: StepContext, step: str, row: Row, what: str, total: Any) -> None:
    """Dead-letter ``row``: it would take the aggregate ``what`` of its key to ``total``."""
    story = (
        "null (left by an earlier version that let it overflow)"
        if total is None
        else f"{total!r}, outside the finite numbers within signed 64-bit integers"
    )
    error = AggregateOverflow(
        f"{what} of key {display_key(row.key)!r} would be {story}; the stored value is unchanged"
    )
    ctx.failures.append(Failure(row, step, error))


def event_time(value: Any) -> int:
    """``value`` as an event time in ms, or :class:`InvalidEventTime`."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and -MAX_MILLIS <= value <= MAX_MILLIS:  # False for NaN too
        return int(value)
    raise InvalidEventTime(
        f"event time must be a number of milliseconds within ±2**62, got {value!r}"
    )


def milliseconds(seconds: float | None, what: str, allow_none: bool = False) -> int | None:
    """Seconds (API and spec unit) → whole milliseconds, validated."""
    if seconds is None:
        if allow_none:
            return None
        raise ConfigError(f"{what} is required (seconds)")
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 <= seconds * 1000 <= MAX_MILLIS  # False for NaN too
    ):
        raise ConfigError(
            f"{what} must be a non-negative number of seconds (at most 2**62 ms), got {seconds!r}"
        )
    return round(seconds * 1000)


# Stream time: the largest record or event time seen on the input partition, kept in state so
# that it survives recovery and a replay decides exactly as the first run did.


def stream_time(view: StateView) -> int | None:
    """The partition's stream time (memoised; None before the first record)."""
    if "t" not in view.memo:
        raw = view.get(STREAM_TIME_KEY)
        view.memo["t"] = None if raw is None else decode_int(raw)
    value: int | None = view.memo["t"]
    return value


def advance_stream_time(view: StateView, timestamp: int) -> int:
    """Stream time after a record at ``timestamp`` (in memo; :func:`persist_stream_time`)."""
    current = stream_time(view)
    now = timestamp if current is None or timestamp > current else current
    view.memo["t"] = now
    return now


def persist_stream_time(view: StateView) -> None:
    now = view.memo.get("t")
    if now is not None:
        view.set(STREAM_TIME_KEY, encode_int(now))
