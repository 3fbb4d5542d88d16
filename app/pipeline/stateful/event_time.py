"""Which event times a window or dedupe step accepts, and what happens to late records (pure rules).

**The clock rule.** A partition's stream time (the largest event time seen there) moves only with
times that are not ahead of the bridge's own wall clock by more than ``max_event_time_skew``: an
event time *or* a Kafka timestamp beyond ``wall clock + max_event_time_skew`` is
:class:`~app.pipeline.errors.InvalidEventTime`, a dead letter that leaves stream time (and every
store) where it was. A record cannot vouch for itself: both of its clocks are held against the
bridge's, read once per batch. Times far *behind* the wall clock (a replay of history) are fine;
once a partition has a stream time, an event time further behind it (or behind the record's own
Kafka timestamp) than the window's reach is a broken time (0, a wrong unit), also
``InvalidEventTime``. The same rule bounds ``dedupe``'s TTL clock (:func:`ahead_of_wall`).

A record that passes but whose windows have all closed is *late*: counted per step
(``eos_bridge_late_records_total``), logged once per checkpoint (:mod:`app.ops.late`) and, as
Kafka Streams does, dropped; with ``late_records=dlq`` dead-lettered as
:class:`~app.pipeline.errors.LateRecord` instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from app.errors import ConfigError
from app.pipeline.errors import InvalidEventTime, LateRecord
from app.pipeline.record import Row

DEFAULT_MAX_EVENT_TIME_SKEW = 86_400.0  # seconds: one day
LATE_RECORDS = ("drop", "dlq")


def check_late_records(value: str, step: str) -> str:
    """``value`` if it is one of :data:`LATE_RECORDS`, else a ConfigError naming the step."""
    if value not in LATE_RECORDS:
        raise ConfigError(
            f"window {step!r}: late_records must be one of {', '.join(LATE_RECORDS)}, got {value!r}"
        )
    return value


def bounds(
    stream_time: int | None, clock: int, skew: int, reach: int, wall: int
) -> tuple[int, int]:
    """The event times (ms) a record may have: ``(lowest, highest)``, both included.

    Ahead: up to ``skew`` past the bridge's wall clock ``wall``, whatever the record or the
    stream time say (a record cannot vouch for itself).

    Behind: only once there is a stream time, by ``reach`` = the larger of ``skew`` and the
    window's size + grace (a record that may still count is never refused) below the earlier
    of the stream time and ``clock`` (the record's Kafka timestamp when the event time is a
    field, else the wall clock; 0 or less: none). Old records cannot move the clock; this bound
    only tells a broken time (0, a wrong unit) from a late one. Before the first record nothing
    is late, so anything goes: a backfill of old events is accepted.
    """
    high = wall + skew
    if stream_time is None:
        return -(2**63), high
    return min(stream_time, clock) - reach if clock > 0 else stream_time - reach, high


def ahead_of_wall(step: str, kind: str, row: Row, skew: int, wall: int) -> InvalidEventTime:
    """The error of a record whose Kafka timestamp is more than ``skew`` ms ahead of the
    bridge's wall clock ``wall`` (``kind``: ``window`` or ``dedupe``)."""
    return InvalidEventTime(
        f"{where(row)}: record timestamp {row.timestamp} ({iso(row.timestamp)}) is more than "
        f"max_event_time_skew ({skew / 1000:g} s) of {kind} {step!r} ahead of the bridge's "
        f"clock ({iso(wall)}); dead-lettered without moving stream time"
    )


def check_event_time(
    step: str,
    row: Row,
    event_time: int,
    stream_time: int | None,
    clock: int,
    skew: int,
    reach: int,
    wall: int,
) -> InvalidEventTime | None:
    """None when ``event_time`` and the record's Kafka timestamp are within :func:`bounds`;
    else the error naming the record, the time, the clocks, the step and its setting."""
    if row.timestamp > wall + skew:
        return ahead_of_wall(step, "window", row, skew, wall)
    low, high = bounds(stream_time, clock, skew, reach, wall)
    if low <= event_time <= high:
        return None
    if event_time > high:
        return InvalidEventTime(
            f"{where(row)}: event time {event_time} ({iso(event_time)}) is more than "
            f"max_event_time_skew ({skew / 1000:g} s) of window {step!r} ahead of the bridge's "
            f"clock ({iso(wall)}); dead-lettered without moving stream time"
        )
    second = "record timestamp" if clock == row.timestamp else "the bridge's clock"
    return InvalidEventTime(
        f"{where(row)}: event time {event_time} ({iso(event_time)}) is more than "
        f"{reach / 1000:g} s (max_event_time_skew of window {step!r}, or its size + grace if "
        f"longer) behind the partition's clock (stream time {iso(stream_time)}, {second} "
        f"{iso(clock)}); dead-lettered without moving stream time"
    )


def late_record(
    step: str, row: Row, event_time: int, stream_time: int, size: int, grace: int
) -> LateRecord:
    """The error of a record whose every window closed before it came (``late_records=dlq``)."""
    return LateRecord(
        f"{where(row)}: event time {event_time} ({iso(event_time)}) is late for window "
        f"{step!r}: every window holding it ({size} ms, grace {grace} ms) had closed at stream "
        f"time {iso(stream_time)}; late_records=dlq dead-letters such records (drop: counted)"
    )


def where(row: Row) -> str:
    """``topic[partition]@offset`` of the input record."""
    return f"{row.source_topic}[{row.partition}]@{row.offset}"


def iso(millis: int | None) -> str:
    """Milliseconds since the epoch as UTC ISO 8601 (as is when outside what dates hold)."""
    if millis is None:
        return "none yet"
    try:
        return datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return f"{millis} ms"
