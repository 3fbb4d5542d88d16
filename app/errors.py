"""The exception tree of eos-bridge, and what the loop does about each branch.

::

    BridgeError                    root: everything the bridge raises on purpose
    ├── ConfigError                bad or inconsistent setting; refuse to start      exit 2
    ├── KafkaFatalError            unrecoverable client error (authorization, unknown
    │   │                          outcome, producer re-created too often)            exit 3
    │   └── InstanceFenced         another live instance uses our group.instance.id   exit 5
    ├── ProducerFenced             producer fatal or fenced by a newer epoch of our own
    │                              transactional.id: re-create the producer in-process
    │                              (init_transactions), rewind, continue (bounded)
    ├── CheckpointAborted          abortable failure inside a transaction (delivery error,
    │   │                          ILLEGAL_GENERATION, ...): abort, drop uncommitted state,
    │   │                          rewind to the committed offsets, continue
    │   ├── RecordRefused          the broker refused one output record (too large for the
    │   │                          topic, invalid timestamp, policy): as above, and the
    │   │                          record goes to the dead-letter topic on replay
    │   └── RecordTooLarge         librdkafka refused a record for its size before sending
    │                              it: an output or dead letter is dead-lettered or cut
    │                              at once (app.sink.output); elsewhere the transaction aborts
    ├── PartitionsMigrated         partitions were lost while we held uncommitted work:
    │                              abort, drop their state, rewind the rest, rejoin
    ├── OffsetsUnfetched           the consumer cannot fetch its committed offsets (librdkafka
    │                              #5586): abort, re-assign at the committed offsets
    ├── StateCorrupted             local state unusable: wipe that partition's store and
    │                              restore it from the changelog, continue
    ├── RecoveryError              changelog recovery could not complete              exit 3
    └── RecordError                one record could not be processed; goes to the dead-letter
        ├── DeserializationError   topic (policy ``dlq``) or stops the bridge       exit 4
        ├── StepError              (policy ``fail``)
        │   └── ExpressionLimit    a spec expression would exceed a CPU/memory bound
        ├── OutputTooLarge
        ├── OutputNotEncodable     the output has no faithful form in its format
        ├── StateKeyTooLarge       a stateful step's key is too large for a store + changelog
        ├── OutputRefused          the broker refused it before (see RecordRefused)
        └── ...                    one class per kind of failure: app.pipeline.errors

Kafka errors become these classes in one place, :func:`app.kafka.errors.classify` (by error
code and librdkafka's flags, never by message text); the loop reacts to them in one place,
:class:`app.engine.ladder.Ladder`. A blocking client call that overruns its deadline is not an
exception: the watchdog (:mod:`app.engine.watchdog`) logs it and leaves with exit 3.

Messages name the setting, topic/partition/offset and what to do.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence


class BridgeError(Exception):
    """Root of every error eos-bridge raises on purpose."""


class ConfigError(BridgeError):
    """A setting is missing, malformed or inconsistent; the message names it.

    The message is cut to :data:`MAX_CONFIG_MESSAGE` characters: it may quote what the user
    wrote, and a 1 MB literal in a spec must not become a 1 MB log line.
    """

    def __init__(self, message: str = "") -> None:
        if len(message) > MAX_CONFIG_MESSAGE:
            cut = len(message) - MAX_CONFIG_MESSAGE
            message = f"{message[:MAX_CONFIG_MESSAGE]}... ({cut:,} more characters cut)"
        super().__init__(message)


MAX_CONFIG_MESSAGE = 1000


class KafkaFatalError(BridgeError):
    """A client error no in-process reaction can repair; the process exits (code 3)."""


class InstanceFenced(KafkaFatalError):
    """Another live consumer joined the group with our ``group.instance.id`` (exit 5)."""


class InstanceIdUnreleased(InstanceFenced):
    """KIP-848: the group still has a member with our ``group.instance.id`` that has not left
    (``UNRELEASED_INSTANCE_ID``): this instance's own previous process, killed within the
    session timeout, until its session expires; past that, a live twin (exit 5)."""


class ProducerFenced(BridgeError):
    """The producer is fatally broken or fenced; a new one (same transactional.id) takes over."""


class CheckpointAborted(BridgeError):
    """The open transaction must be aborted; processing resumes from committed offsets.

    Args:
        message: why, naming the call, topic or partition.
        reason: the ``reason`` label of ``eos_bridge_transaction_aborts_total``.
    """

    def __init__(self, message: str, reason: str = "abortable") -> None:
        super().__init__(message)
        self.reason = reason


class RecordRefused(CheckpointAborted):
    """The broker refused one output record; it is dead-lettered when its input is replayed.

    Args:
        message: what the broker said, with the output topic.
        topic: the output topic of the refused record.
        key: its key bytes.
        value: its value bytes.
    """

    def __init__(self, message: str, topic: str, key: bytes | None, value: bytes | None) -> None:
        super().__init__(message, reason="record_refused")
        self.topic, self.key, self.value = topic, key, value


class RecordTooLarge(CheckpointAborted):
    """librdkafka refused one record for its size (over ``message.max.bytes``) at produce."""


class PartitionsMigrated(BridgeError):
    """Partitions were revoked or lost while uncommitted work existed for them.

    Args:
        message: which partitions, and how they went.
        reason: the ``reason`` label of ``eos_bridge_transaction_aborts_total``.
    """

    def __init__(self, message: str, reason: str = "partitions_migrated") -> None:
        super().__init__(message)
        self.reason = reason


class OffsetsUnfetched(BridgeError):
    """librdkafka could not fetch the committed offsets of a new assignment and will not ask
    again (librdkafka #5586): abort, then assign the partitions at their committed offsets."""


class StateCorrupted(BridgeError):
    """Local state cannot be trusted; it must be wiped and restored from the changelog.

    Args:
        message: what is wrong, naming the store and partition.
        partitions: the input partitions ``(topic, partition)`` whose stores must be wiped
            (empty when unknown: then the loop treats it as fatal).
    """

    def __init__(self, message: str, partitions: Sequence[tuple[str, int]] = ()) -> None:
        super().__init__(message)
        self.partitions = list(partitions)


class RecoveryError(BridgeError):
    """Restoring state from a changelog topic failed."""


class RecordError(BridgeError):
    """One input record could not be turned into output."""


class DeserializationError(RecordError):
    """The input value could not be decoded."""


class StepError(RecordError):
    """A pipeline step raised for this record (after its retries)."""


class ExpressionLimit(StepError):
    """A spec expression would build too large a value (huge power, repeat, width...)."""


class OutputTooLarge(RecordError):
    """An output record exceeds ``max_output_bytes``."""


class OutputRefused(RecordError):
    """The broker refused this record's output in an earlier, aborted transaction."""


class OutputNotEncodable(RecordError):
    """The output value or key has no faithful form in its format: for JSON an integer
    beyond 64 bits, NaN or ±inf (JSON has no such numbers; the encoder would write ``null``), a
    non-string dict key, a type JSON does not know, or text that is not valid UTF-8."""


class StateKeyTooLarge(RecordError):
    """A state key (the record key of a stateful step, or its dedupe id) is larger than a
    store and its changelog topic can take (``app.state.keys.MAX_STATE_KEY_BYTES``)."""


def forget_frames(exc: BaseException) -> None:
    """Once an error has been dealt with in-process: drop the tracebacks of ``exc`` and of its
    causes, after clearing the local variables of their finished frames.

    Those frames hold what the failed call used — a fenced producer in a local or in a
    lambda's closure (a cleared frame still holds its function) — and a handled error can
    outlive its handler: the 2-hour soak kept four replaced producers in one process after 50
    minutes, each reachable only through the traceback of the error that had replaced it, and
    a full ``gc.collect()`` there freed nothing. Each kept its librdkafka threads, sockets and
    buffers. The messages stay; only where they were raised is forgotten (already logged).
    Frames still running are left alone (``traceback.clear_frames`` skips them).
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current.__traceback__ = None
        pending += [current.__cause__, current.__context__]
