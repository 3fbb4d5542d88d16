"""What can go wrong with one record: the error classes a dead letter names.

Every class here is a :class:`~app.errors.RecordError`: the record goes to the dead-letter topic
inside the open transaction (``on_error=dlq``) or stops the bridge (``on_error=fail``, exit 4).
Its class name is the dead letter's ``eos.dlq.error.class`` header (the README lists them all)::

    RecordError (app.errors)
    ├── DeserializationError (app.errors)   input is not JSON
    ├── OutputTooLarge (app.errors)          output over max_output_bytes / message.max.bytes
    ├── OutputNotEncodable (app.errors)      output has no faithful form in its format
    ├── InvalidRoute                         a route gave a non-string or an empty string
    ├── UnknownRouteTopic                    a route named a topic that does not exist
    ├── AggregateOverflow                    sum/count/window aggregate out of range
    ├── InvalidEventTime                     a window's event time is unusable or far off
    └── LateRecord                           every window of the record closed (late_records=dlq)

A step whose own code raises (an expression or a Python function: ``ValueError``,
``TypeError``, ``KeyError``, ``ZeroDivisionError``, a spec's ``ExpressionLimit``...) is
dead-lettered under that exception's class name.
"""

from __future__ import annotations

from app.errors import OutputNotEncodable as OutputNotEncodable
from app.errors import RecordError

# What a user's step may raise and still be only its record's fault: any exception, and
# ``sys.exit``/``GeneratorExit``/``KeyboardInterrupt`` raised by its own code (the process's
# SIGINT/SIGTERM never raise: app.runner handles them).
USER_ERRORS: tuple[type[BaseException], ...] = (
    Exception,
    SystemExit,
    GeneratorExit,
    KeyboardInterrupt,
)


def error_text(exc: BaseException) -> str:
    """``str(exc)``, or what it is when its ``__str__`` raises (a user's exception class)."""
    try:
        return str(exc)
    except USER_ERRORS as inner:
        return f"<str() of {type(exc).__name__} raised {type(inner).__name__}>"


# Integers every reader of our output and changelogs can hold (Java long, Spark LongType).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class InvalidRoute(RecordError):
    """A route returned something other than a topic name (not a string, or empty)."""


class UnknownRouteTopic(RecordError):
    """A route named a topic that does not exist on the cluster."""


class AggregateOverflow(RecordError):
    """A stateful aggregate would leave signed 64-bit integers or stop being a finite number
    (a sum past 2**63 - 1, a float sum reaching inf, NaN). The stored value is left as it was."""


class InvalidEventTime(RecordError):
    """A window's event time is not a number of milliseconds within ±2**62, or lies more than
    ``max_event_time_skew`` ahead of (or far behind) its partition's clock; it does not move
    stream time (:mod:`app.pipeline.stateful.event_time`)."""


class LateRecord(RecordError):
    """Every window that holds the record's event time had closed when it came; only with the
    window's ``late_records=dlq`` (by default late records are dropped and counted)."""
