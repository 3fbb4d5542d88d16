"""Tumbling and hopping windows on event time, with a grace period.

A window ``[start, start + size)`` has ``start`` a multiple of ``hop`` (tumbling: hop = size).
Stream time is the largest event time seen on the input partition (kept in state, so it
survives recovery). A window *closes* when stream time reaches ``end + grace``: its final result
is emitted once and its state deleted. A record whose window is already closed is late and
ignored for that window; a record late for every window it falls in is counted and dropped, or
dead-lettered (``late_records``). An event time or Kafka timestamp too far ahead of the bridge's
wall clock is a dead letter that does not move stream time (``max_event_time_skew``, the clock
rule of :mod:`.event_time`). Within that rule, results only depend on the order of records in
the partition, never on batch or checkpoint boundaries, so a replay after a crash emits exactly
the same windows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.errors import ConfigError
from app.ops.late import LATE_LOG
from app.ops.metrics import LATE_RECORDS
from app.pipeline.errors import AggregateOverflow
from app.pipeline.record import Failure, Row
from app.pipeline.stateful.aggregates import Aggregate, Aggregation, Combined, Part
from app.pipeline.stateful.event_time import (
    DEFAULT_MAX_EVENT_TIME_SKEW,
    check_event_time,
    check_late_records,
    iso,
    late_record,
    where,
)
from app.pipeline.stateful.kit import (
    Extractor,
    FieldSpec,
    Views,
    event_time,
    extract_all,
    extractor,
    milliseconds,
    persist_stream_time,
    provenance,
    require_state,
    stream_time,
)
from app.pipeline.steps import StepContext
from app.serde import json
from app.state.access import StateView
from app.state.keys import decode_int, decode_key, display_key, encode_int, encode_key

WINDOW_PREFIX = b"w"  # w + start (8 bytes) + encoded key → accumulator (JSON)
_UNREAD: Any = object()


# ---- window arithmetic (pure) ----------------------------------------------------------------


def window_starts(timestamp: int, size: int, hop: int) -> list[int]:
    """Starts of every window ``[s, s + size)``, ``s`` a multiple of ``hop``, that holds
    ``timestamp``, in ascending order."""
    last = timestamp - timestamp % hop
    return list(range(last, timestamp - size, -hop))[::-1]


def is_closed(start: int, size: int, grace: int, stream_time: int) -> bool:
    """A window is closed once stream time reached its end plus the grace period."""
    return start + size + grace <= stream_time


def last_closed_start(stream_time: int, size: int, grace: int, hop: int) -> int:
    """The largest window start (a multiple of ``hop``) that is closed at ``stream_time``."""
    bound = stream_time - size - grace
    return bound - bound % hop


# ---- the step --------------------------------------------------------------------------------


@dataclass(slots=True)
class Window:
    """Aggregate rows per key in event-time windows; emit each window's final result.

    Output rows: key = the window's key; value = ``{"key", "start", "end", "value",
    "_source_topic", "_source_partition", "_source_offset"}`` (times in ms; the source is the
    record whose event time closed the window).

    Args:
        size: window length in ms.
        hop: distance between window starts in ms (= size: tumbling).
        grace: how long after its end a window still accepts late records, in ms.
        aggregate: what to compute.
        timestamp: event time in ms (field name, function of the value or RowFn); default:
            the Kafka record timestamp.
        name: step name = store name.
        max_skew: how far ahead of the bridge's wall clock an event time or a Kafka timestamp
            may be, in ms (``max_event_time_skew``); further is an ``InvalidEventTime`` dead
            letter that leaves stream time unmoved.
        late: ``drop`` (count and drop late records, as Kafka Streams) or ``dlq`` (count and
            dead-letter them as ``LateRecord``).
        clock: the bridge's wall clock in seconds (a seam for tests).
    """

    size: int
    hop: int
    grace: int
    aggregate: Aggregation
    timestamp: FieldSpec | None = None
    name: str = "window"
    max_skew: int = round(DEFAULT_MAX_EVENT_TIME_SKEW * 1000)
    late: str = "drop"
    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    stateful: bool = True
    _ts: Extractor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.size <= 0 or not 0 < self.hop <= self.size or self.grace < 0:
            raise ConfigError(
                f"window {self.name!r}: need size > 0, 0 < hop <= size, grace >= 0 "
                f"(got size={self.size} ms, hop={self.hop} ms, grace={self.grace} ms)"
            )
        if self.max_skew <= 0:
            raise ConfigError(
                f"window {self.name!r}: max_event_time_skew must be positive "
                f"(got {self.max_skew} ms)"
            )
        check_late_records(self.late, self.name)
        self._ts = None if self.timestamp is None else extractor(self.timestamp)

    @property
    def store(self) -> str:
        return self.name

    def _extract(self, row: Row) -> tuple[bytes, int, Any]:
        ts = row.timestamp if self._ts is None else event_time(self._ts(row))
        return encode_key(row.key), ts, self.aggregate.extract(row)

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        views = Views(require_state(ctx, self.name), self.name)
        last: dict[tuple[str, int], Row] = {}
        late: list[tuple[Row, int, int]] = []  # (row, event time, stream time)
        size, hop, grace, add = self.size, self.hop, self.grace, self.aggregate.add
        tumbling = hop == size
        skew, reach = self.max_skew, max(self.max_skew, size + grace)
        # The clock rule (event_time.bounds): no time past the bridge's wall clock + skew,
        # read once per batch; the second clock of the behind bound is the record's Kafka
        # timestamp, or, when that is the event time, the wall clock.
        wall = int(self.clock() * 1000)
        limit, field_time = wall + skew, self._ts is not None
        # Accumulators touched by this batch, decoded once and encoded once per batch (a key
        # sees many records per batch): (partition view, window key) -> accumulator.
        accs: dict[tuple[StateView, bytes], Any] = {}
        for row, got in zip(rows, extract_all(rows, ctx, self.name, self._extract), strict=True):
            if got is None:
                continue
            key, ts, value = got
            view = views.of(row)
            current = stream_time(view)
            clock = row.timestamp if field_time else wall
            # Within the bounds inline; anything else asks event_time.check_event_time.
            if (
                current is None
                or clock <= 0
                or ts > limit
                or row.timestamp > limit
                or ts < (current if current < clock else clock) - reach
            ):
                invalid = check_event_time(self.name, row, ts, current, clock, skew, reach, wall)
                if invalid is not None:  # a dead letter that leaves stream time unmoved
                    ctx.failures.append(Failure(row, self.name, invalid))
                    continue
            now = ts if current is None or ts > current else current
            starts = (ts - ts % size,) if tumbling else window_starts(ts, size, hop)
            # Closed windows are skipped (is_closed): their results are already out.
            starts = [start for start in starts if start + size + grace > now]
            if not starts:
                late.append((row, ts, now))
                continue
            updates = []
            try:
                for start in starts:
                    wkey = WINDOW_PREFIX + encode_int(start) + key
                    slot = (view, wkey)
                    acc = accs.get(slot, _UNREAD)
                    if acc is _UNREAD:
                        raw = view.get(wkey)
                        acc = None if raw is None else json.loads(raw)
                    updates.append((slot, add(acc, value)))
            except AggregateOverflow as exc:
                # As if the record never came: no accumulator changed, stream time unmoved.
                ctx.failures.append(Failure(row, self.name, exc))
                continue
            accs.update(updates)
            view.memo["t"] = now
            last[(row.source_topic, row.partition)] = row
        self._late(late, ctx)
        return self._write(accs, views, last)

    def _write(
        self, accs: dict[tuple[StateView, bytes], Any], views: Views, last: dict[Any, Row]
    ) -> list[Row]:
        """Store the batch's accumulators and stream times; the windows that closed."""
        dumps = json.dumps
        for (view, wkey), acc in accs.items():
            view.set(wkey, dumps(acc))
        out: list[Row] = []
        for tp, row in last.items():
            view = views.by_partition[tp]
            persist_stream_time(view)
            out += self._close(view, row)
        return out

    def _late(self, late: list[tuple[Row, int, int]], ctx: StepContext) -> None:
        """Count the batch's late records; with ``late_records=dlq`` dead-letter them too."""
        if not late:
            return
        LATE_RECORDS[self.name] += len(late)
        if self.late == "dlq":
            for row, ts, now in late:
                error = late_record(self.name, row, ts, now, self.size, self.grace)
                ctx.failures.append(Failure(row, self.name, error))
            return
        row, ts, now = late[0]
        first = f"{where(row)}: event time {ts} ({iso(ts)}), stream time {iso(now)}"
        LATE_LOG.note(self.name, len(late), first, self.grace)

    def _close(self, view: StateView, trigger: Row) -> list[Row]:
        now = stream_time(view)
        if now is None:
            return []
        closable = last_closed_start(now, self.size, self.grace, self.hop)
        if view.memo.get("closed_to") == closable:
            return []
        view.memo["closed_to"] = closable
        out = []
        upper = WINDOW_PREFIX + encode_int(closable + 1)
        for wkey, raw in view.scan(WINDOW_PREFIX, upper):
            view.delete(wkey)
            start, key = decode_int(wkey[1:9]), decode_key(wkey[9:])
            row = trigger.derive(
                {
                    "key": display_key(key),
                    "start": start,
                    "end": start + self.size,
                    **self.aggregate.fields(json.loads(raw)),
                    **provenance(trigger),
                }
            )
            row.key = key
            out.append(row)
        return out


def window(
    size: float,
    hop: float | None = None,
    grace: float = 0.0,
    aggregate: str | list[Part] = "count",
    of: FieldSpec | None = None,
    timestamp: FieldSpec | None = None,
    name: str = "window",
    max_event_time_skew: float = DEFAULT_MAX_EVENT_TIME_SKEW,
    late_records: str = "drop",
) -> Window:
    """A tumbling (``hop`` None) or hopping window; times in seconds. ``aggregate``: one kind
    (with ``of``), or several ``(kind, of)`` parts (:class:`.aggregates.Combined`: ``count``
    and a field per part)."""
    size_ms = milliseconds(size, f"window {name!r} size")
    assert size_ms is not None
    hop_ms = size_ms if hop is None else milliseconds(hop, f"window {name!r} hop")
    grace_ms = milliseconds(grace, f"window {name!r} grace")
    skew_ms = milliseconds(max_event_time_skew, f"window {name!r} max_event_time_skew")
    assert hop_ms is not None and grace_ms is not None and skew_ms is not None
    return Window(
        size_ms,
        hop_ms,
        grace_ms,
        Combined(aggregate) if isinstance(aggregate, list) else Aggregate(aggregate, of),
        timestamp,
        name,
        skew_ms,
        late_records,
    )
