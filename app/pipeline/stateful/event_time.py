"""Which event times a window step accepts, and what happens to late records (pure rules).

A window closes on its partition's stream time, the largest event time seen there. One record
whose event time is years ahead would move that clock so far that every good record after it is
late. So a record is first checked against the partition's clock (:func:`check_event_time`): an
event time more than ``max_event_time_skew`` ahead of it, or (once the partition has a clock)
far behind it, is :class:`~app.pipeline.errors.InvalidEventTime`, a dead letter that leaves
stream time where it was. The partition's clock is its stream time together with a second,
independent clock (:func:`bounds`): the record's Kafka timestamp when the event time is a field
of the value, the bridge's own clock when the event time is the Kafka timestamp itself.

A record that passes but whose windows have all closed is *late*: counted per step
(``eos_bridge_late_records_total``) and, as Kafka Streams does, dropped; with
``late_records=dlq`` dead-lettered as :class:`~app.pipeline.errors.LateRecord` instead.
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


def bounds(stream_time: int | None, clock: int, skew: int, reach: int) -> tuple[int, int]:
    """The event times (ms) a record may have: ``(lowest, highest)``, both included.

    ``clock`` is a second clock next to the stream time (0 or less: none; Kafka's timestamp
    -1 means none, 0 an unset one): the record's Kafka timestamp, or the bridge's clock when
    the Kafka timestamp is the event time.

    Ahead: up to ``skew`` past the later of the stream time and ``clock``. The second clock
    moves on its own, so after a pause of days new records are accepted again, while a time
    years ahead of both is refused; with no stream time yet (the partition's first record) it
    is the only clock there is.

    Behind: only once there is a stream time, by ``reach`` = the larger of ``skew`` and the
    window's size + grace (a record that may still count is never refused) below the earlier
    of both clocks. Old records cannot move the clock; this bound only tells a broken time
    (0, a wrong unit) from a late one. Before the first record nothing is late, so anything
    goes: a backfill of old events is accepted.
    """
    clocks = [t for t in (stream_time, clock if clock > 0 else None) if t is not None]
    if not clocks:
        return -(2**63), 2**63
    if stream_time is None:
        return -(2**63), max(clocks) + skew
    return min(clocks) - reach, max(clocks) + skew


def check_event_time(
    step: str, row: Row, event_time: int, stream_time: int | None, clock: int, skew: int,
    reach: int,
) -> InvalidEventTime | None:  # fmt: skip
    """None when ``event_time`` is within :func:`bounds`; else the error naming the record,
    the event time, the clocks, the step and its setting. ``clock`` is the record's Kafka
    timestamp, unless that is the event time: then the bridge's clock."""
    low, high = bounds(stream_time, clock, skew, reach)
    if low <= event_time <= high:
        return None
    if event_time > high:
        off = f"more than max_event_time_skew ({skew / 1000:g} s) of window {step!r} ahead of"
    else:
        off = (
            f"more than {reach / 1000:g} s (max_event_time_skew of window {step!r}, or its "
            f"size + grace if longer) behind"
        )
    second = "record timestamp" if clock == row.timestamp else "the bridge's clock"
    return InvalidEventTime(
        f"{where(row)}: event time {event_time} ({iso(event_time)}) is {off} the partition's "
        f"clock (stream time {iso(stream_time)}, {second} {iso(clock)}); dead-lettered "
        f"without moving stream time"
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
