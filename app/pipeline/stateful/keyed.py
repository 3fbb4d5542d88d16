"""Per-key stateful steps: dedupe, count, sum (windows: :mod:`.windows`).

Usable from Python (``Pipeline().then(Count())`` or ``Pipeline().count()``) and from declarative
specs (:mod:`.compilers`).

Every step's store is named after the step (``name=``): it names the changelog topic
``changelog__<group>--<input topic>--<name>`` and must stay stable across deployments.
Outputs carry ``_source_topic``/``_source_partition``/``_source_offset`` of the input record
they came from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app.errors import ConfigError
from app.pipeline.errors import INT64_MAX
from app.pipeline.fusion import FusedBatch, fused_loop
from app.pipeline.record import Failure, Row
from app.pipeline.stateful.event_time import DEFAULT_MAX_EVENT_TIME_SKEW, ahead_of_wall
from app.pipeline.stateful.kit import (
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    Extractor,
    FieldSpec,
    Views,
    advance_stream_time,
    extract_all,
    extractor,
    milliseconds,
    number,
    out_of_range,
    overflow,
    persist_stream_time,
    require_state,
)
from app.pipeline.steps import StepContext
from app.serde import Formats, json
from app.state.access import StateAccess, StateView
from app.state.keys import decode_int, display_key, encode_int, encode_key

SEEN_PREFIX = b"d"  # d + encoded id → stream time it was first seen (8 bytes)
EXPIRY_PREFIX = b"x"  # x + expiry time (8 bytes) + encoded id → b"" (time-ordered index)


@dataclass(slots=True)
class Dedupe:
    """Pass the first record of each id; drop repeats seen within ``ttl`` of stream time.

    Stream time is the partition's largest record timestamp (kept in state), so the outcome is
    the same however a replay is batched. Expired ids are swept from state via a time index.
    With a ``ttl``, the clock rule of windows holds (:mod:`.event_time`): a record whose Kafka
    timestamp is more than ``max_event_time_skew`` ahead of the bridge's wall clock is an
    ``InvalidEventTime`` dead letter that moves nothing (else it would expire every id).

    Args:
        ttl: seconds an id is remembered (None = forever).
        by: the id: a field name, a function of the value, or a RowFn (default: the key).
        name: step name = store name.
        max_event_time_skew: seconds; default the smaller of one day and ``ttl``.
        clock: the bridge's wall clock in seconds (a seam for tests).
    """

    ttl: float | None = None
    by: FieldSpec | None = None
    name: str = "dedupe"
    max_event_time_skew: float | None = None
    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    stateful: bool = True
    repartition: bool = True  # by a field: regroup by it first (app.pipeline.split)
    partitions: int | None = None  # of the repartition topic (None: the inputs' largest count)
    _id: Extractor | None = field(default=None, init=False, repr=False)
    _ttl_ms: int | None = field(default=None, init=False, repr=False)
    _skew_ms: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._ttl_ms = milliseconds(self.ttl, f"dedupe {self.name!r} ttl", allow_none=True)
        if self._ttl_ms == 0:
            raise ConfigError(f"dedupe {self.name!r}: ttl must be positive (or None = forever)")
        self._id = None if self.by is None else extractor(self.by)
        what = f"dedupe {self.name!r} max_event_time_skew"
        skew = milliseconds(self.max_event_time_skew, what, allow_none=True)
        if skew == 0:
            raise ConfigError(f"{what} must be positive")
        if skew is None and self._ttl_ms is not None:
            skew = min(round(DEFAULT_MAX_EVENT_TIME_SKEW * 1000), self._ttl_ms)
        self._skew_ms = skew

    @property
    def store(self) -> str:
        return self.name

    def _ident(self, row: Row) -> bytes:
        return encode_key(row.key if self._id is None else self._id(row))

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        views = Views(require_state(ctx, self.name), self.name)
        ttl, skew = self._ttl_ms, self._skew_ms
        wall = int(self.clock() * 1000)  # the clock rule: once per batch
        limit = 2**63 if skew is None else wall + skew
        out: list[Row] = []
        for row, ident in zip(rows, extract_all(rows, ctx, self.name, self._ident), strict=True):
            if ident is None:
                continue
            if row.timestamp > limit:  # moves nothing: a dead letter
                error = ahead_of_wall(self.name, "dedupe", row, limit - wall, wall)
                ctx.failures.append(Failure(row, self.name, error))
                continue
            view = views.of(row)
            now = advance_stream_time(view, row.timestamp)
            seen_key = SEEN_PREFIX + ident
            seen = view.get(seen_key)
            if seen is not None and (ttl is None or decode_int(seen) + ttl > now):
                continue  # a repeat
            view.set(seen_key, encode_int(now))
            if ttl is not None:
                view.set(EXPIRY_PREFIX + encode_int(now + ttl) + ident, b"")
            out.append(row)
        for view in views.by_partition.values():
            persist_stream_time(view)
            if ttl is not None:
                _sweep(view, ttl)
        return out


def _sweep(view: StateView, ttl: int) -> None:
    """Delete ids whose ttl ran out (at most every ttl/10 of stream time)."""
    now: int = view.memo["t"]
    if now < view.memo.get("sweep_at", now):
        return
    view.memo["sweep_at"] = now + max(ttl // 10, 1000)
    for xkey, _ in view.scan(EXPIRY_PREFIX, EXPIRY_PREFIX + encode_int(now + 1)):
        view.delete(xkey)
        seen_key = SEEN_PREFIX + xkey[9:]
        seen = view.get(seen_key)
        if seen is not None and decode_int(seen) + ttl <= now:
            view.delete(seen_key)  # not refreshed since: expired for good


@dataclass(slots=True)
class Count:
    """Count records per key; each input becomes ``{"key", "count", "_source_*"}``.

    It reads the Kafka key alone, so a pipeline that starts with it never parses input values
    (as Kafka Streams' ``groupByKey().count()`` over a byte-array value serde).
    """

    name: str = "count"
    stateful: bool = True
    reads_value: ClassVar[bool] = False

    @property
    def store(self) -> str:
        return self.name

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        views = Views(require_state(ctx, self.name), self.name)
        out: list[Row] = []
        for row, key in zip(rows, extract_all(rows, ctx, self.name, _row_key), strict=True):
            if key is None:
                continue
            view = views.of(row)
            raw = view.get(key)
            count = 1 if raw is None else int(raw) + 1
            if count > INT64_MAX:
                overflow(ctx, self.name, row, f"count {self.name!r}", count)
                continue
            view.set(key, b"%d" % count)
            row.value = _keyed_output(row, "count", count)
            out.append(row)
        return out

    def fused(self, access: StateAccess, max_bytes: int, formats: Formats) -> FusedBatch:
        """A pipeline that is this step alone, over consumer messages (see
        :func:`app.pipeline.steps.fuse`): the same outputs and state as :meth:`__call__` plus
        :class:`app.sink.output.Output`, without Row objects."""
        return _fused_count(self.name, access, max_bytes, formats)


@dataclass(slots=True)
class Sum:
    """Sum a numeric field per key; each input becomes ``{"key", "sum", "_source_*"}``.

    Args:
        of: field name, function of the value, or RowFn.
        name: step name = store name.
    """

    of: FieldSpec = "value"
    name: str = "sum"
    stateful: bool = True
    _get: Extractor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._get = extractor(self.of)

    @property
    def store(self) -> str:
        return self.name

    def _extract(self, row: Row) -> tuple[bytes, int | float]:
        assert self._get is not None
        return encode_key(row.key), number(self._get(row), f"sum {self.name!r} field")

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        views = Views(require_state(ctx, self.name), self.name)
        out: list[Row] = []
        for row, got in zip(rows, extract_all(rows, ctx, self.name, self._extract), strict=True):
            if got is None:
                continue
            key, amount = got
            view = views.of(row)
            raw = view.get(key)
            try:
                total = (0 if raw is None else json.loads(raw)) + amount
            except TypeError:  # a stored null: see overflow()
                total = None
            if total is None or out_of_range(total):
                overflow(ctx, self.name, row, f"sum {self.name!r}", total)
                continue
            view.set(key, json.dumps(total))
            row.value = _keyed_output(row, "sum", total)
            out.append(row)
        return out


# The fused count's loop around its body: the per-batch overlay, then the counts into the state.
_COUNT_PROLOGUE = (
    "overlay = []",
    "seen = {}",
    "last_topic, last_partition = None, -1",
    "view = counts = None",
)
_COUNT_EPILOGUE = (
    "for view, counts in overlay:",
    "    set_ = view.set",
    "    for state_key, count in counts.items():",
    "        set_(state_key, b'%d' % count)",
)


def _fused_count(store: str, access: StateAccess, max_bytes: int, formats: Formats) -> FusedBatch:
    """Count a batch of consumer messages in one pass and produce each output: P2's hot path.

    New counts go to a per-batch overlay, and into the state once the loop ends (the loop's
    epilogue): after the whole batch, or before the first record it hands to the general path
    (a consumer error, a count past INT64_MAX, an output over ``max_bytes``), so the state then
    holds exactly the records produced so far; the general path counts the rest and isolates
    the record. A count enters the overlay only once its output passed the size check.
    """
    body = [
        "source, partition = m.topic(), m.partition()",
        "if partition != last_partition or source != last_topic:",
        "    last_topic, last_partition = source, partition",
        "    view = access.partition(STORE, source, partition)",  # PartitionsMigrated: raised
        "    counts = seen.get((source, partition))",
        "    if counts is None:",
        "        counts = seen[(source, partition)] = {}",
        "        overlay.append((view, counts))",
        "k = m.key()",
        "state_key = encode_key(k)",
        "count = counts.get(state_key)",
        "if count is None:",
        "    raw = view.get(state_key)",
        "    count = 1 if raw is None else int(raw) + 1",
        "else:",
        "    count += 1",
        f"if count > {INT64_MAX}:",
        "    return i, n",
        f"v = {{'key': display_key(k), 'count': count, {SOURCE_TOPIC!r}: source,",
        f"     {SOURCE_PARTITION!r}: partition, {SOURCE_OFFSET!r}: m.offset()}}",
    ]
    names = {
        "STORE": store,
        "access": access,
        "encode_key": encode_key,
        "display_key": display_key,
        "INT64_MAX": INT64_MAX,
        "int": int,
        "SOURCE_TOPIC": SOURCE_TOPIC,
        "SOURCE_PARTITION": SOURCE_PARTITION,
        "SOURCE_OFFSET": SOURCE_OFFSET,
    }
    return fused_loop(
        body,
        where=f"count {store!r} (fused)",
        names=names,
        max_bytes=max_bytes,
        formats=formats,
        accept=("counts[state_key] = count",),
        epilogue=_COUNT_EPILOGUE,
        input_numbers=False,
        prologue=_COUNT_PROLOGUE,
    )


def _keyed_output(row: Row, field: str, value: Any) -> dict[str, Any]:
    """``{"key", field: value, "_source_*"}``: provenance(row) built in, one dict per record."""
    return {
        "key": display_key(row.key),
        field: value,
        SOURCE_TOPIC: row.source_topic,
        SOURCE_PARTITION: row.partition,
        SOURCE_OFFSET: row.offset,
    }


def _row_key(row: Row) -> bytes:
    return encode_key(row.key)
