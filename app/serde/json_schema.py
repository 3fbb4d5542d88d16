"""The ``json_schema`` codec: confluent-kafka's ``JSONSerializer``/``JSONDeserializer``.

Values are validated against the schema both ways (the library's ``jsonschema`` validation):
an input record that does not match its writer schema is
:class:`~app.serde.registry.RecordUndecodable`, an output value that does not match the
output schema is :class:`~app.serde.registry.OutputNotEncodable`. On Apicurio 2.4, adding a
property is a BACKWARD-compatible change only for a closed schema
(``"additionalProperties": false``).
"""

from __future__ import annotations

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

from app.errors import ConfigError
from app.serde.base import Role
from app.serde.registry import (
    RegistrySettings,
    SchemaSettings,
    load_schema_text,
)
from app.serde.registry_codec import Deserialize, RegistryCodec, Serialize


class JsonSchemaCodec(RegistryCodec):
    """JSON documents validated by a registered JSON Schema, as dicts."""

    name = "json_schema"
    schema_type = "JSON"

    def __init__(
        self,
        registry: RegistrySettings,
        schema: SchemaSettings,
        role: Role = Role.OUTPUT_VALUE,
        client: SchemaRegistryClient | None = None,
    ) -> None:
        super().__init__(registry, schema, role, client)
        self._schema_text = load_schema_text(schema)
        # Without a reader schema the library validates each record against its writer schema.
        self._reader = JSONDeserializer(
            self._schema_text, schema_registry_client=self.client, conf=self.reader_conf()
        )

    def _make_serializer(self) -> Serialize:
        reader = None if self.settings.use_latest_version else self._schema_text
        serializer = JSONSerializer(reader, self.client, conf=self.serde_conf())
        return serializer  # type: ignore[no-any-return]

    def _deserializer(self, data: bytes, schema_id: int, writer: Schema) -> Deserialize:
        return self._reader  # type: ignore[no-any-return]

    def _output_schema(self) -> Schema:
        if self._schema_text is None:
            raise ConfigError("json_schema output needs schema_file (or use_latest_version)")
        return Schema(self._schema_text, "JSON")
