"""The exceptions of the changelog package, and the one Kafka error fact it reads itself.

::

    ChangelogError              root: everything this package raises on purpose
    ├── ChangelogConfigError    a name, topic or topic setting a changelog cannot use; the
    │   │                       message names it and what to do
    │   └── ChangelogFormatError  state written in a newer format than this code reads
    │                           (a downgrade past a format change): restarting cannot help
    └── ChangelogReadError      restore cannot read a changelog or apply one of its records

The package imports nothing from ``app``: the bridge maps these to its own tree where it calls
in (:mod:`app.state.errors`), and hands in its Kafka error classification as plain predicates
(:data:`ErrorTest`), so that every Kafka error is still classified in one place.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException

# The bridge's answer to "is this error worth another try?" (app.kafka.errors).
ErrorTest = Callable[[KafkaError], bool]


class ChangelogError(Exception):
    """Root of every error the changelog package raises on purpose."""


class ChangelogConfigError(ChangelogError):
    """A changelog name, topic or topic setting is unusable; the message names it."""


class ChangelogFormatError(ChangelogConfigError):
    """A changelog record or state directory is in a format newer than this code reads."""


class ChangelogReadError(ChangelogError):
    """Restoring from a changelog cannot go on; the message names the partition."""


def inner_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError inside a KafkaException (None for anything else)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None
