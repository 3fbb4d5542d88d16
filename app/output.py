"""Output: serialize rows, produce them, dead-letter failures, latch delivery errors.

Like Kafka Streams' RecordCollector: every record the bridge writes goes through here, into
the producer's open transaction.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException

from app.errors import CheckpointAborted, OutputRefused, OutputTooLarge, RecordError, StepError
from app.kafka.errors import describe, kafka_error, record_refused
from app.pipeline.record import Row
from app.pipeline.steps import Failure
from app.refusals import ALONE, Refusals

log = logging.getLogger(__name__)
_FLUSH_SLICE_S = 0.1

# Dead-letter headers (also documented in the README).
H_TOPIC = "eos.dlq.source.topic"
H_PARTITION = "eos.dlq.source.partition"
H_OFFSET = "eos.dlq.source.offset"
H_CLASS = "eos.dlq.error.class"
H_MESSAGE = "eos.dlq.error.message"
H_STEP = "eos.dlq.error.step"
H_VALUE_DROPPED = "eos.dlq.value.dropped.bytes"


def encode_value(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value)


def encode_key(key: Any) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    return str(key).encode()


class Output:
    """Produces rows and dead letters into the open transaction of ``producer``."""

    def __init__(
        self,
        producer: Any,
        default_topic: str,
        dlq_topic: str,
        max_bytes: int,
        topic_exists: Any,
        client_max_bytes: int = 1_000_000,
    ) -> None:
        self._producer = producer
        self._default_topic = default_topic
        self._dlq_topic = dlq_topic
        self._max_bytes = max_bytes
        self._topic_exists = topic_exists  # callable(str) -> bool, cached by the caller
        self._client_max_bytes = client_max_bytes  # the producer's message.max.bytes
        self._delivery_errors: list[str] = []
        self.refusals = Refusals()  # records the broker refused: DLQ on replay

    def on_delivery(self, err: Any, msg: Any) -> None:
        """Producer-level delivery callback: latch failures; the checkpoint raises them."""
        if err is not None:
            what = f"{describe(err)} (topic {msg.topic()} partition {msg.partition()})"
            self._delivery_errors.append(what)
            if record_refused(err):
                self.refusals.note(err, msg.topic(), msg.key(), msg.value())

    def rebind(self, producer: Any) -> None:
        """Write through ``producer`` from now on (the old one was fenced or failed)."""
        self._producer = producer

    def send(self, rows: list[Row]) -> list[Failure]:
        """Produce ``rows``; returns those that cannot be written (too large, unknown route).

        The hot path of the bridge: the common cases (dict value, bytes or no key, no headers)
        are inlined; everything else goes through :func:`encode_value` / :func:`encode_key`.
        """
        failures: list[Failure] = []
        produce = self._produce_fn()
        default, max_bytes, dumps = self._default_topic, self._max_bytes, orjson.dumps
        for row in rows:
            value = row.value
            payload = dumps(value) if type(value) is dict else encode_value(value)
            if payload is not None and len(payload) > max_bytes:
                failures.append(Failure(row, "output", _too_large(row, len(payload), max_bytes)))
                continue
            topic = row.topic or default
            if self.refusals.pending and self._refused(row, topic, payload, failures):
                continue
            if topic is not default and not self._topic_exists(topic):
                error = StepError(f"route target topic {topic!r} does not exist")
                failures.append(Failure(row, "route", error))
                continue
            key = row.key
            if key is not None and type(key) is not bytes:
                key = encode_key(key)
            headers = row.headers
            try:
                if headers is None:
                    produce(topic, payload, key)  # no keyword argument: cheaper to parse
                else:
                    produce(topic, payload, key, headers=headers)
            except BufferError:
                self._producer.poll(0.05)  # queue full: serve deliveries, then retry
                self._produce(produce, topic, payload, key, headers)
            except KafkaException as exc:
                if not _too_large_for_client(exc):
                    raise CheckpointAborted(
                        f"produce to {topic!r} failed: {describe(exc)}"
                    ) from exc
                size = len(payload or b"") + len(key or b"")
                failures.append(Failure(row, "output", _too_large(row, size, max_bytes)))
        self._producer.poll(0)
        return failures

    def _refused(
        self, row: Row, topic: str, payload: bytes | None, failures: list[Failure]
    ) -> bool:
        """Handle ``row`` if the broker refused its output before (see :mod:`app.refusals`):
        a confirmed refusal joins ``failures`` (dead letter), a suspect is produced alone."""
        key = encode_key(row.key)
        verdict = self.refusals.check((topic, key, payload))
        if verdict is None:
            return False
        if verdict == ALONE:
            self._producer.flush(30)  # alone in its produce request: refused or not, by itself
            self._produce(self._produce_fn(), topic, payload, key, row.headers)
            self._producer.flush(30)
            return True
        where = f"{row.source_topic}[{row.partition}]@{row.offset}"
        error = OutputRefused(f"output of {where} was refused by the broker: {verdict}")
        failures.append(Failure(row, "output", error))
        return True

    def _produce_fn(self) -> Any:
        """``producer.produce``; with a per-record delivery report while diagnosing a refusal
        (a producer without producer-level reports cannot name the refused record otherwise)."""
        if self.refusals.diagnosing:
            return functools.partial(self._producer.produce, on_delivery=self.on_delivery)
        return self._producer.produce

    @property
    def fast_path_max_bytes(self) -> int:
        """Largest record :func:`app.pipeline.steps.fuse` may encode: half the output limit, so
        records near either size limit take the general path, which dead-letters them."""
        return min(self._max_bytes, self._client_max_bytes) // 2

    def send_encoded(self, records: list[tuple[bytes, Any, Any]]) -> None:
        """Produce records already encoded by :func:`app.pipeline.steps.fuse` (value, key,
        headers; sizes checked there) to the default topic."""
        produce, topic = self._producer.produce, self._default_topic
        for payload, key, headers in records:
            try:
                if headers is None:
                    produce(topic, payload, key)
                else:
                    produce(topic, payload, key, headers=headers)
            except BufferError:
                self._producer.poll(0.05)  # queue full: serve deliveries, then retry
                self._produce(produce, topic, payload, key, headers)
            except KafkaException as exc:
                raise CheckpointAborted(f"produce to {topic!r} failed: {describe(exc)}") from exc
        self._producer.poll(0)

    def dead_letter(self, failure: Failure) -> None:
        """Write the failed record's original bytes to the DLQ with error headers."""
        row, error = failure.row, failure.error
        headers = list(row.headers or ())
        headers += [
            (H_TOPIC, row.source_topic.encode()),
            (H_PARTITION, str(row.partition).encode()),
            (H_OFFSET, str(row.offset).encode()),
            (H_CLASS, type(error).__name__.encode()),
            (H_MESSAGE, str(error)[:2000].encode()),
            (H_STEP, failure.step.encode()),
        ]
        key = encode_key(row.key)
        try:
            self._produce(self._producer.produce, self._dlq_topic, row.raw, key, headers)
        except CheckpointAborted as exc:
            if not _too_large_for_client(exc.__cause__):
                raise
            # The input bytes plus our headers exceed message.max.bytes: keep the headers
            # (they name the source offset, where the bytes still are) and drop the value.
            headers.append((H_VALUE_DROPPED, str(len(row.raw or b"")).encode()))
            self._produce(self._producer.produce, self._dlq_topic, None, key, headers)

    def flush(self, timeout: float) -> None:
        """Wait for every delivery; raise :class:`CheckpointAborted` on any failure.

        Flushes in slices and stops at the first latched error: after a failed delivery the
        transaction must abort, and librdkafka holds the rest of the queue until it does.
        """
        deadline = time.monotonic() + timeout
        remaining = self._producer.flush(min(timeout, _FLUSH_SLICE_S))
        while remaining and not self._delivery_errors and time.monotonic() < deadline:
            remaining = self._producer.flush(min(deadline - time.monotonic(), _FLUSH_SLICE_S))
        self.refusals.raise_if_refused()
        if remaining and not self._delivery_errors:
            raise CheckpointAborted(f"{remaining} records not delivered within {timeout}s")
        if self._delivery_errors:
            first, count = self._delivery_errors[0], len(self._delivery_errors)
            self._delivery_errors.clear()
            raise CheckpointAborted(f"{count} delivery error(s), first: {first}")

    def reset(self) -> None:
        """Forget latched errors (after an abort they belong to the aborted transaction);
        refused records are kept until their replay dead-letters them."""
        self._delivery_errors.clear()
        self.refusals.reset()

    def _produce(
        self, produce: Any, topic: str, value: bytes | None, key: bytes | None, headers: Any
    ) -> None:
        while True:
            try:
                produce(topic, value, key, headers=headers)
                return
            except BufferError:
                self._producer.poll(0.05)  # queue full: serve deliveries, then retry
            except KafkaException as exc:
                raise CheckpointAborted(f"produce to {topic!r} failed: {describe(exc)}") from exc


def _too_large_for_client(exc: BaseException | None) -> bool:
    """librdkafka refused a record synchronously for its size (a record error, not abortable)."""
    err = kafka_error(exc) if exc is not None else None
    return err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE


def _too_large(row: Row, size: int, limit: int) -> RecordError:
    return OutputTooLarge(
        f"output of {row.source_topic}[{row.partition}]@{row.offset} is {size} bytes, "
        f"over max_output_bytes={limit}"
    )
