"""The ``avro`` codec: confluent-kafka's ``AvroSerializer``/``AvroDeserializer`` (fastavro).

Records are dicts both ways. Input is read with the writer schema its ID names, or, when
``schema_file`` is set, resolved to that reader schema (Avro schema evolution: a record
written with an older version gets the newer fields' defaults). Output is written with
``schema_file`` (or the subject's latest version) and must match it exactly, except for
missing fields that have a default: an unknown field or a wrong type is
:class:`~app.serde.registry.OutputNotEncodable`.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

from app.errors import ConfigError
from app.serde.base import Role
from app.serde.registry import (
    RegistrySettings,
    SchemaSettings,
    load_schema_text,
)
from app.serde.registry_codec import Deserialize, RegistryCodec, Serialize


class AvroCodec(RegistryCodec):
    """Avro records behind a Schema Registry, as dicts (see the module docstring)."""

    name = "avro"
    schema_type = "AVRO"

    def __init__(
        self,
        registry: RegistrySettings,
        schema: SchemaSettings,
        role: Role = Role.OUTPUT_VALUE,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        super().__init__(registry, schema, role, client)
        self._schema_text = load_schema_text(schema)
        # One deserializer for every writer ID: the library parses each writer schema once.
        self._reader = AvroDeserializer(self.client, self._schema_text, conf=self.reader_conf())

    def _make_serializer(self) -> Serialize:
        conf: dict[str, Any] = {**self.serde_conf(), "validate.strict.allow.default": True}
        serializer = AvroSerializer(self.client, self._schema_text, conf=conf)
        return serializer  # type: ignore[no-any-return]

    def _deserializer(self, data: bytes, schema_id: int, writer: Schema) -> Deserialize:
        return self._reader  # type: ignore[no-any-return]

    def _output_schema(self) -> Schema:
        if self._schema_text is None:
            raise ConfigError(
                "avro output needs schema_file (or use_latest_version with a registered subject)"
            )
        return Schema(self._schema_text, "AVRO")
