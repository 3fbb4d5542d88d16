"""Schema-ID translation between two registries, and the ``passthrough`` mode.

A bridge between two clusters usually sits between two registries: the 4-byte schema ID of a
record means nothing in the other one. :class:`SchemaTranslator` gives the record the target
registry's ID for the same schema (registering it there under the subject strategy if absent)
and leaves the payload untouched; mappings are cached, so the registries are asked once per
(topic, source ID).
"""

from __future__ import annotations

import io
from typing import Any

from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.serialization import MessageField

from app.errors import DeserializationError, OutputNotEncodable
from app.serde.base import Codec, Role
from app.serde.registry import (
    RecordUndecodable,
    RegistryConfigError,
    RegistrySettings,
    SchemaSettings,
    fetch_schema,
    is_registry_error,
    parse_header,
    record_name,
    registry_failure,
    subject_name,
)


class SchemaTranslator:
    """Rewrites the schema ID of wire-format bytes from a source registry to a target one.

    The schema is looked up in the source registry once per source ID and registered in the
    target under the subject strategy (only looked up there when ``auto_register`` is off);
    the mapping is cached per (topic, source ID).

    Args:
        source: settings of the registry the input bytes' IDs belong to.
        target: settings of the registry the output's IDs must resolve in.
        schema: subject strategy and normalization used in the target.
        role: the output role (key or value: the subject's suffix under the topic strategy).
    """

    def __init__(
        self,
        source: RegistrySettings,
        target: RegistrySettings,
        schema: SchemaSettings,
        role: Role = Role.OUTPUT_VALUE,
    ) -> None:
        self._source, self._target = source, target
        self._source_client, self._target_client = source.client(), target.client()
        self._schema = schema
        self._field = MessageField.KEY if role.is_key else MessageField.VALUE
        self._ids: dict[tuple[str, int], int] = {}
        self._schemas: dict[int, Schema] = {}

    def translate(self, data: bytes | None, topic: str) -> bytes | None:
        """``data`` with the target registry's ID for the same schema (None stays None)."""
        if data is None:
            return None
        source_id = parse_header(data)
        schema = self._schemas.get(source_id) or self._source_schema(source_id)
        framing = SchemaId(schema.schema_type or "AVRO")
        try:  # Protobuf message indexes follow the ID
            payload = framing.from_bytes(io.BytesIO(data)).read()
        except Exception as exc:
            raise RecordUndecodable(f"{topic}: truncated header of schema ID {source_id}") from exc
        target_id = self._ids.get((topic, source_id))
        if target_id is None:
            target_id = self._register(schema, topic, framing.message_indexes)
            self._ids[(topic, source_id)] = target_id
        return (
            SchemaId(framing.schema_type, target_id, None, framing.message_indexes).id_to_bytes()
            + payload
        )

    def _source_schema(self, schema_id: int) -> Schema:
        schema = fetch_schema(
            self._source_client, schema_id, self._source.safe_url, "source registry"
        )
        self._schemas[schema_id] = schema
        return schema

    def _register(self, schema: Schema, topic: str, indexes: list[int] | None) -> int:
        if schema.references:
            raise RegistryConfigError(
                f"topic {topic}: a schema with references cannot be translated yet"
            )
        record = record_name(schema, indexes)
        subject = subject_name(self._schema.subject_strategy, topic, self._field, record)
        copy = Schema(schema.schema_str, schema.schema_type or "AVRO")
        normalize = self._schema.normalize
        try:
            if self._schema.auto_register:
                return self._target_client.register_schema(subject, copy, normalize)
            found = self._target_client.lookup_schema(subject, copy, normalize).schema_id
        except Exception as exc:
            if is_registry_error(exc):
                raise registry_failure(exc, self._target.safe_url, subject) from exc
            raise
        if found is None:
            raise RegistryConfigError(f"{self._target.safe_url} gave no schema ID for {subject}")
        return found


def passthrough(data: bytes | None, topic: str) -> bytes | None:
    """The ``passthrough`` mode: the bytes untouched, schema ID and all."""
    return data


class TranslatingCodec:
    """An output ``bytes`` codec whose values are wire-format records of the source registry:
    written with the target registry's schema ID for the same schema, payload untouched (an
    :class:`app.serde.base.Codec`; ``schema_ids=translate``).

    A value that is not in the wire format, or whose schema ID the source registry does not
    know, cannot be written faithfully: :class:`OutputNotEncodable` (a dead letter) naming
    the class of the fault. A registry that cannot be reached is not the record's fault.

    Args:
        inner: the ``bytes`` codec (text and None as it writes them).
        translator: rewrites the IDs.
    """

    name = "bytes"
    structured = False
    inline = None

    def __init__(self, inner: Codec, translator: SchemaTranslator) -> None:
        self._inner, self.translator = inner, translator

    def decode(self, data: bytes | None, topic: str) -> Any:
        return self._inner.decode(data, topic)

    def encode(self, value: Any, topic: str) -> bytes | None:
        data = self._inner.encode(value, topic)
        try:
            return self.translator.translate(data, topic)
        except DeserializationError as exc:
            raise OutputNotEncodable(
                f"schema ID not translated ({type(exc).__name__}): {exc}"
            ) from exc
