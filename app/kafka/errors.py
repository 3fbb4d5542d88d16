"""The one classifier of Kafka errors: what the bridge does about each (see app.errors).

By error code and librdkafka's flags (``fatal``, ``retriable``, ``txn_requires_abort``), never by
message text, with one exception that says why: :func:`offsets_unfetched`. Modelled on Kafka
Streams: ``StreamsProducer.isRecoverable`` (fenced / unknown producer → a new producer, not an
exit) and ``RecordCollectorImpl`` (a refused record is the record's problem, not the
process's); the reactions themselves are :class:`app.engine.ladder.Ladder`'s.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from app.errors import (
    BridgeError,
    CheckpointAborted,
    InstanceFenced,
    KafkaFatalError,
    ProducerFenced,
)

RETRY_PAUSE_S = (0.1, 1.0)  # first and longest pause between retries of a retriable error


class Reaction(Enum):
    """What the bridge does about one error, mildest first."""

    RETRY = "retry"  # the same call again, within a deadline
    ABORT = "abort"  # abort the transaction, rewind to committed offsets, continue
    RECREATE = "recreate"  # close the producer, make a new one (init_transactions), rewind
    INSTANCE_FENCED = "instance_fenced"  # a live twin has our group.instance.id: exit 5
    FATAL = "fatal"  # nothing in-process helps: exit 3


# The producer lost its epoch (fenced by a newer init_transactions of our transactional.id,
# the transaction timed out, or the broker forgot the producer id): StreamsProducer's
# "isRecoverable" set. A new producer with the same transactional.id recovers.
_PRODUCER_LOST = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.UNKNOWN_PRODUCER_ID,
        KafkaError.INVALID_PRODUCER_ID_MAPPING,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
        KafkaError._FATAL,  # librdkafka's fatal-error event; its ``fatal()`` flag is not set
    }
)
# A new client cannot repair these: the credentials or ACLs are wrong.
_NOT_REPAIRABLE = frozenset(
    {
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)
# The broker refused one record for what it is, not for the state of the cluster.
_RECORD_REFUSED = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
    }
)
# Leadership or metadata still settling: worth asking again for admin/offset look-ups.
_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        # A leader election in flight: the broker knows a newer (or not yet the) leader epoch
        # than the request; Kafka's clients retry these after a metadata refresh (a soak's
        # bandwidth fault made a restore's ListOffsets meet FENCED_LEADER_EPOCH and exit).
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        # librdkafka's admin ListOffsets when its metadata names no leader for the partition
        # yet ("Failed to query partition leaders: No leaders found"): a 2-hour soak's
        # kill-group-coordinator fault made a restore's watermark look-up exit on it.
        KafkaError._NOENT,
    }
)


def kafka_error(exc: BaseException | KafkaError | None) -> KafkaError | None:
    """The KafkaError itself, or the one inside a KafkaException; else None."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def classify(exc: BaseException | KafkaError) -> Reaction:
    """The reaction to an error raised by a producer or transaction call."""
    err = kafka_error(exc)
    if err is None:
        return Reaction.FATAL
    code = err.code()
    if code in _NOT_REPAIRABLE:
        return Reaction.FATAL
    if err.fatal() or code in _PRODUCER_LOST:
        return Reaction.RECREATE
    if err.txn_requires_abort() or code in _RECORD_REFUSED:
        return Reaction.ABORT
    if err.retriable():
        return Reaction.RETRY
    return Reaction.FATAL


def bridge_error(what: str, exc: BaseException | KafkaError) -> BridgeError:
    """The exception of :mod:`app.errors` the loop reacts to, for an error of call ``what``.

    A retriable error that reached here was not retried by its caller: aborting (and
    replaying) is the safe reaction.
    """
    message = f"{what}: {describe(exc)}"
    reaction = classify(exc)
    if reaction in (Reaction.ABORT, Reaction.RETRY):
        return CheckpointAborted(message)
    if reaction is Reaction.RECREATE:
        return ProducerFenced(message)
    if reaction is Reaction.INSTANCE_FENCED:
        return InstanceFenced(message)
    return KafkaFatalError(message)


def classify_consumer(err: KafkaError) -> Reaction:
    """The reaction to an error the consumer hands back with a message (or raises).

    librdkafka raises exactly one fatal consumer error: a static member fenced by another
    member with the same ``group.instance.id`` (``FENCED_INSTANCE_ID``; delivered to
    ``consume()`` as code ``_FATAL`` with the ``fatal()`` flag *not* set, so the code decides).
    Everything else but a missing or forbidden topic librdkafka retries itself.
    """
    code = err.code()
    if err.fatal() or code in (KafkaError._FATAL, KafkaError.FENCED_INSTANCE_ID):
        return Reaction.INSTANCE_FENCED
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        return Reaction.FATAL
    if code in _NOT_REPAIRABLE:
        return Reaction.FATAL
    return Reaction.RETRY


def offsets_unfetched(err: KafkaError) -> bool:
    """The consumer's OffsetFetch for its new assignment failed as a whole, which librdkafka
    does not retry (issue #5586): its partitions would never be fetched.

    The one text match of this module, on purpose: librdkafka reports this failure with the
    request's own error code (``NOT_COORDINATOR``, ``COORDINATOR_LOAD_IN_PROGRESS``...), the
    same codes as consumer errors it does retry, and with no flag; only the text its group
    coordinator code writes ("Failed to fetch committed offsets") tells them apart. A
    librdkafka that rewords it makes this return False: the bridge then waits for the
    watchdog's stale-progress exit instead of re-assigning at once (nothing is lost).
    """
    return "Failed to fetch committed offsets" in err.str()


def group_protocol_unsupported(err: KafkaError) -> bool:
    """The broker has no KIP-848 group coordinator (Kafka before 4.0, or
    ``group.coordinator.rebalance.protocols`` without ``consumer``): librdkafka's consumer fails
    with ``_FATAL`` ("API version not supported: ConsumerGroupHeartbeat"), the code it also uses
    for a fenced static member, so only the API's name in the text tells them apart."""
    fatal = err.code() in (KafkaError._FATAL, KafkaError.UNSUPPORTED_VERSION)
    text = err.str()
    return fatal and "API version not supported" in text and "ConsumerGroupHeartbeat" in text


def instance_id_unreleased(err: KafkaError) -> bool:
    """KIP-848 refuses a static member whose ``group.instance.id`` another member still holds
    (``UNRELEASED_INSTANCE_ID``); librdkafka delivers it as ``_FATAL`` with the broker's text,
    so, as for :func:`group_protocol_unsupported`, only the text tells it from a fence."""
    held = err.code() in (KafkaError._FATAL, KafkaError.UNRELEASED_INSTANCE_ID)
    return held and "instance ID is still used" in err.str()


def consumer_retriable(err: KafkaError) -> bool:
    """librdkafka retries this consumer error by itself (:func:`classify_consumer`)."""
    return classify_consumer(err) is Reaction.RETRY


def record_refused(err: Any) -> bool:
    """The broker (or the client) refused one record for its content or size."""
    inner = kafka_error(err)
    return inner is not None and inner.code() in _RECORD_REFUSED


def settling(exc: BaseException | KafkaError) -> bool:
    """Worth asking again (admin and offset look-ups): retriable or leadership settling."""
    err = kafka_error(exc)
    return err is not None and (err.retriable() or err.code() in _SETTLING)


def has_code(exc: BaseException | KafkaError | None, code: int) -> bool:
    """The error (or the KafkaError inside ``exc``) has ``code``."""
    err = kafka_error(exc)
    return err is not None and err.code() == code


def describe(err: Any) -> str:
    """``NAME: reason`` for logs and error messages."""
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    inner = kafka_error(err) if isinstance(err, BaseException) else None
    return describe(inner) if inner is not None else str(err)
