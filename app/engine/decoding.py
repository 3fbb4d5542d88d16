"""A batch's messages as rows: the loop's decode step, and what a consumer error event means.

Consumer error events arrive among the messages; each is reacted to here
(:func:`consumer_error`), never turned into a row. A value or key that does not decode is a
``deserialize`` failure naming its record (a dead letter), not an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from app.errors import (
    ConfigError,
    DeserializationError,
    InstanceFenced,
    InstanceIdUnreleased,
    KafkaFatalError,
    OffsetsUnfetched,
)
from app.kafka.errors import (
    Reaction,
    classify_consumer,
    describe,
    group_protocol_unsupported,
    instance_id_unreleased,
    offsets_unfetched,
)
from app.kafka.ports import Message
from app.pipeline.builder import Pipeline
from app.pipeline.record import Failure, Row
from app.pipeline.steps import reads_value
from app.serde import Formats
from app.serde.json import verbatim

log = logging.getLogger("app.engine.loop")

Decoder = Callable[[Any, str], Any]


class BatchDecoder:
    """Messages → rows and decoding failures (consumer error events are reacted to).

    Args:
        decode: the value decoder (None: values stay bytes).
        decode_key: the key decoder (None: keys stay bytes).
        on_error: what a consumer error event does (:func:`consumer_error`).
    """

    def __init__(
        self,
        decode: Decoder | None,
        decode_key: Decoder | None,
        on_error: Callable[[KafkaError], None],
    ) -> None:
        self._decode = decode
        self._decode_key = decode_key
        self._on_error = on_error

    @classmethod
    def of(cls, pipeline: Pipeline, formats: Formats, instance_id: str) -> BatchDecoder:
        """The loop's decoder of ``pipeline``'s input in ``formats``."""
        key = None if formats.key_in.name == "bytes" else formats.key_in.decode
        return cls(
            value_decoder(pipeline, formats), key, lambda err: consumer_error(err, instance_id)
        )

    def __call__(self, messages: list[Message]) -> tuple[list[Row], list[Failure]]:
        rows: list[Row] = []
        failures: list[Failure] = []
        decode, decode_key = self._decode, self._decode_key
        for m in messages:
            err = m.error()
            if err is not None:
                self._on_error(err)
                continue
            raw = m.value()
            row = Row(raw, m.key(), m.headers(), m.topic(), m.partition(), m.offset(), 0, raw)
            row.timestamp = m.timestamp()[1]
            try:
                if decode is not None:
                    row.value = decode(raw, row.source_topic)
                if decode_key is not None:
                    row.key = decode_key(row.key, row.source_topic)
            except DeserializationError as exc:
                where = f"{row.source_topic}[{row.partition}]@{row.offset}"
                failures.append(Failure(row, "deserialize", type(exc)(f"{where}: {exc}")))
                continue
            rows.append(row)
        return rows, failures


def consumer_error(err: KafkaError, instance_id: str) -> None:
    """React to a consumer error event: raise what the ladder handles, else log it."""
    if group_protocol_unsupported(err):
        raise ConfigError(
            "group_protocol=consumer (BRIDGE_GROUP_PROTOCOL): the group coordinator does not "
            f"speak KIP-848 ({describe(err)}); brokers before Kafka 4.0 need "
            "BRIDGE_GROUP_PROTOCOL=classic"
        )
    if instance_id_unreleased(err):
        raise InstanceIdUnreleased(
            f"the group still holds a member with instance_id={instance_id!r} "
            f"(group.instance.id) that has not left ({describe(err)}): this instance's "
            f"previous process until its session times out, or another live instance with the "
            f"same id"
        )
    reaction = classify_consumer(err)
    if reaction is Reaction.INSTANCE_FENCED:
        raise InstanceFenced(
            f"the group coordinator fenced instance_id={instance_id!r} "
            f"(group.instance.id): another live instance uses the same id, or, after a "
            f"coordinator failover, this instance's own earlier membership ({describe(err)}). "
            f"If it repeats, give every instance its own BRIDGE_INSTANCE_ID"
        )
    if reaction is Reaction.FATAL:
        raise KafkaFatalError(f"consumer: {describe(err)}")
    if offsets_unfetched(err):  # librdkafka does not retry this one (#5586)
        raise OffsetsUnfetched(f"consumer: {describe(err)}")
    log.warning("consumer error (librdkafka retries): %s", describe(err))


def value_decoder(
    pipeline: Pipeline, formats: Formats
) -> Callable[[bytes | None, str], Any] | None:
    """How input values are decoded: not at all when the first step ignores them (count by
    key); checked and kept as they are when there is no step, JSON in and out."""
    if not pipeline.steps:
        checked = verbatim(formats.value_in, formats.value_out)
        if checked is not None:
            return checked
    if reads_value(pipeline.steps) and formats.value_in.structured:
        return formats.value_in.decode
    return None
