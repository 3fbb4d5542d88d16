"""Classify librdkafka errors into what the bridge does about them (see app.errors)."""

from __future__ import annotations

from enum import Enum
from typing import Any

from confluent_kafka import KafkaError, KafkaException


class Action(Enum):
    RETRY = "retry"
    ABORT = "abort"
    FATAL = "fatal"


_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The KafkaError inside a KafkaException, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def classify(exc: BaseException) -> Action:
    """Retry the same call, abort the transaction, or give up (fenced/fatal/unknown)."""
    err = kafka_error(exc)
    if err is None:
        return Action.FATAL
    if err.fatal() or err.code() in _FENCED:
        return Action.FATAL
    if err.txn_requires_abort():
        return Action.ABORT
    if err.retriable():
        return Action.RETRY
    return Action.FATAL


def describe(err: Any) -> str:
    """``NAME: reason`` for logs and error messages."""
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    inner = kafka_error(err) if isinstance(err, BaseException) else None
    return describe(inner) if inner is not None else str(err)
