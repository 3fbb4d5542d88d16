"""The base of the ``avro``, ``protobuf`` and ``json_schema`` codecs: one topic role, one registry.

It checks the wire header, resolves each writer schema once per ID and turns every failure of
confluent-kafka's serdes into the error classes of :mod:`app.serde.registry`; the subclasses
only build the library's serializer and deserializer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from app.errors import BridgeError, OutputNotEncodable
from app.serde.base import Inline, Role
from app.serde.registry import (
    RecordUndecodable,
    RegistryConfigError,
    RegistrySettings,
    SchemaSettings,
    SubjectStrategy,
    fetch_schema,
    is_registry_error,
    parse_header,
    record_name,
    registry_failure,
    strategy_function,
    subject_name,
)

Serialize = Callable[[Any, SerializationContext], bytes | None]
Deserialize = Callable[[bytes, SerializationContext | None], Any]


class RegistryCodec:
    """What the Avro, Protobuf and JSON Schema codecs share: one topic role, one registry
    (an :class:`app.serde.base.Codec`).

    Subclasses build confluent-kafka's serializer and deserializer (hooks below); this class
    checks the header, resolves the writer schema once per ID and turns every failure into
    the bridge's error classes.

    Args:
        registry: how to reach the registry.
        schema: strategy, registration and schema file of this topic role.
        role: the topic role; a key role registers ``<topic>-key`` under the topic strategy.
        client: a client to share (one per registry is enough); made from ``registry`` if None.
    """

    name = "registry"
    structured = True  # decodes to dicts: a pipeline's field expressions apply
    inline: Inline | None = None  # the fused loop calls decode/encode
    schema_type = "AVRO"
    _writer_format: str | None = None  # the ``format`` a writer schema is asked in

    def __init__(
        self,
        registry: RegistrySettings,
        schema: SchemaSettings,
        role: Role = Role.OUTPUT_VALUE,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        self.registry, self.settings, self.role = registry, schema, role
        self.field = MessageField.KEY if role.is_key else MessageField.VALUE
        self.client = client or registry.client()
        self._serializer: Serialize | None = None
        self._writers: dict[int, Schema] = {}  # schema ID -> writer schema, asked once

    # -- hooks ------------------------------------------------------------------------------

    def _make_serializer(self) -> Serialize:
        raise NotImplementedError

    def _deserializer(self, data: bytes, schema_id: int, writer: Schema) -> Deserialize:
        """The library deserializer for a record with this writer schema."""
        raise NotImplementedError

    def _output_schema(self) -> Schema:
        """The schema ``encode`` writes (from ``schema_file``)."""
        raise NotImplementedError

    def _to_library(self, value: Any) -> Any:
        return value

    def _from_library(self, obj: Any) -> Any:
        return obj

    # -- the seam ---------------------------------------------------------------------------

    def decode(self, data: bytes | None, topic: str) -> Any:
        """The value of a wire-format record (None stays None).

        Raises:
            NotWireFormat, UnknownSchemaId, RecordUndecodable: this record's fault.
            RegistryUnavailable: the registry's; retry later.
        """
        if data is None:
            return None
        schema_id = parse_header(data)
        writer = self._writers.get(schema_id) or self._writer_schema(schema_id, topic)
        try:
            return self._from_library(self._deserializer(data, schema_id, writer)(data, None))
        except Exception as exc:
            if is_registry_error(exc):
                raise registry_failure(exc, self.registry.safe_url, None) from exc
            raise RecordUndecodable(
                f"{topic}: {self.name} record with schema ID {schema_id} does not decode: {exc}"
            ) from exc

    def encode(self, value: Any, topic: str) -> bytes | None:
        """Wire-format bytes of ``value`` under the output schema (None stays None).

        Raises:
            OutputNotEncodable: the value does not match the schema.
            RegistryUnavailable: the registry's fault; retry later.
            RegistryConfigError: the registry refused the schema (409, 404, 401/403).
        """
        if value is None:
            return None
        if self._serializer is None:
            self._serializer = self._make_serializer()
        try:
            return self._serializer(
                self._to_library(value), SerializationContext(topic, self.field)
            )
        except BridgeError:
            raise
        except Exception as exc:
            if is_registry_error(exc):
                raise registry_failure(exc, self.registry.safe_url, self.subject(topic)) from exc
            raise OutputNotEncodable(
                f"output to {topic} does not match its {self.name} schema: {exc}"
            ) from exc

    def exact_problem(self, value: Any) -> str | None:
        """Why ``value`` does not match the writer schema exactly, types included, or None.

        :meth:`encode` is what the bridge writes with (its library may coerce a value); a tool
        that feeds a topic asks this first (``produce``). The base has no stricter check.
        """
        return None

    def prepare(self, topic: str) -> int:
        """Register (or look up) the output schema for ``topic`` now, at start-up, so that a
        refusal is a one-line :class:`RegistryConfigError` before any record; its ID."""
        subject = self.subject(topic)
        try:
            if self.settings.use_latest_version:
                found = self.client.get_latest_version(subject).schema_id
            elif self.settings.auto_register:
                found = self.client.register_schema(
                    subject, self._output_schema(), self.settings.normalize
                )
            else:
                found = self.client.lookup_schema(
                    subject, self._output_schema(), self.settings.normalize
                ).schema_id
        except Exception as exc:
            if is_registry_error(exc):
                raise registry_failure(exc, self.registry.safe_url, subject) from exc
            raise
        if found is None:
            raise RegistryConfigError(f"{self.registry.safe_url} gave no schema ID for {subject}")
        return found

    def subject(self, topic: str) -> str:
        """The output subject for ``topic`` under the configured strategy."""
        record = None
        if self.settings.subject_strategy is not SubjectStrategy.TOPIC:
            record = record_name(self._output_schema())
        return subject_name(self.settings.subject_strategy, topic, self.field, record)

    def close(self) -> None:
        """Close the registry client's HTTP session."""
        self.client.close()

    def _writer_schema(self, schema_id: int, topic: str) -> Schema:
        """The writer schema of ``schema_id``: one request per ID, then kept in ``_writers``."""
        url = self.registry.safe_url
        writer = fetch_schema(self.client, schema_id, url, topic, self._writer_format)
        self._writers[schema_id] = writer
        return writer

    @staticmethod
    def reader_conf() -> dict[str, Any]:
        """Deserializer settings: records are decoded by schema ID, with no subject at all
        (the record strategy without a record name names none; the library's default strategy
        would ask the registry for topic associations)."""
        return {"subject.name.strategy": record_subject_name_strategy}

    def serde_conf(self) -> dict[str, Any]:
        """Serializer settings the library understands, from :class:`SchemaSettings`."""
        latest = self.settings.use_latest_version
        return {
            "auto.register.schemas": self.settings.auto_register and not latest,
            "use.latest.version": latest,
            "normalize.schemas": self.settings.normalize,
            "subject.name.strategy": strategy_function(self.settings.subject_strategy),
        }
