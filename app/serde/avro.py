"""The ``avro`` codec: confluent-kafka's ``AvroSerializer``/``AvroDeserializer`` (fastavro).

Records are dicts both ways. Input is read with the writer schema its ID names, or, when
``schema_file`` is set, resolved to that reader schema (Avro schema evolution: a record
written with an older version gets the newer fields' defaults). Output is written with
``schema_file`` (or the subject's latest version) and must match it exactly, except for
missing fields that have a default: an unknown field or a wrong type is
:class:`~app.serde.registry.OutputNotEncodable`.
"""

from __future__ import annotations

import io
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.avro import parse_schema_with_repo
from fastavro import schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from app.errors import ConfigError
from app.serde.base import Inline, Role
from app.serde.registry import (
    MAGIC_BYTE,
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
        self._parsed: dict[int, tuple[Any, Any]] = {}  # schema ID -> (writer, reader), parsed
        self._parsed_reader = (
            None if self._schema_text is None else parse_schema_with_repo(self._schema_text, {})
        )
        if role is Role.INPUT_VALUE:
            self.inline = Inline(self.fast_loads, _no_dumps)
        self._header = b""  # the output's magic byte and schema ID, once prepared
        self._writer: Any = None  # the output schema, parsed once for fast_dumps

    def fast_loads(self, data: bytes) -> Any:
        """The fused loop's decode: the library's own steps for a record without rules
        (header check, writer schema by ID, ``fastavro.schemaless_reader`` with the parsed
        writer and reader schemas), schemas parsed once per ID. Any exception sends the record
        to :meth:`decode`, which names the error."""
        if len(data) <= 5 or data[0] != 0:  # the library's own test (AvroDeserializer)
            raise ValueError("not the wire format")
        schema_id = int.from_bytes(data[1:5], "big")
        parsed = self._parsed.get(schema_id) or self._parse(schema_id)
        return schemaless_reader(io.BytesIO(data[5:]), parsed[0], parsed[1], False)

    def _parse(self, schema_id: int) -> tuple[Any, Any]:
        writer = self._writers.get(schema_id) or self._writer_schema(schema_id, "")
        if writer.references or writer.schema_str is None:
            raise ValueError("references: the library's path resolves them")
        parsed_writer = parse_schema_with_repo(writer.schema_str, {})
        if parsed_writer == "bytes" or (
            isinstance(parsed_writer, dict) and parsed_writer.get("type") == "bytes"
        ):
            raise ValueError("a bytes schema: the library's path reads it")
        # The library passes the writer schema as the reader too; None reads the same, faster.
        reader = self._parsed_reader
        self._parsed[schema_id] = (parsed_writer, reader)
        return parsed_writer, reader

    def prepare(self, topic: str) -> int:
        """Register or look up the output schema (see the base class); an output value codec
        of a record schema then encodes in the fused loop itself for ``topic``
        (:meth:`fast_dumps`) unless the library's path runs more than fastavro's writer
        (``use_latest_version``: the latest version's rules)."""
        schema_id = super().prepare(topic)
        text = self._schema_text
        if self.role is not Role.OUTPUT_VALUE or self._header or text is None:
            return schema_id
        parsed: Any = parse_schema_with_repo(text, {})
        if self.settings.use_latest_version or not _is_record(parsed):
            return schema_id
        self._writer = parsed
        self._header = bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big")
        self.inline = Inline(_no_loads, self.fast_dumps, per_topic=True)
        return schema_id

    def fast_dumps(self, value: Any) -> bytes:
        """The fused loop's encode for the prepared topic: the bytes of the library's
        serializer without rules (magic byte, schema ID, ``fastavro.schemaless_writer`` with
        the same strictness), the schema parsed once. Any exception sends the record to
        :meth:`encode`, which names the error."""
        out = io.BytesIO()
        out.write(self._header)
        schemaless_writer(out, self._writer, value, **_WRITER_STRICTNESS)
        return out.getvalue()

    def exact_problem(self, value: Any) -> str | None:
        """Why ``value`` is not exactly a datum of ``schema_file``, naming the field
        (``fastavro.validation.validate``: ``"12.50"`` is not a double, although the writer
        would coerce it); a missing field that has a default is fine, as when writing."""
        if self._parsed_reader is None:
            return None
        try:
            validate(value, self._parsed_reader, raise_errors=True)
        except ValidationError as exc:
            if not exc.errors:
                return f"does not match the avro schema: {exc}"
            first = exc.errors[0]
            wanted = dict.fromkeys(
                _type_name(e.schema) for e in exc.errors if e.field == first.field
            )
            field = first.field or "(the value)"
            return f"field {field} is {first.datum!r}; the schema wants {' or '.join(wanted)}"
        return None

    def _make_serializer(self) -> Serialize:
        conf: dict[str, Any] = {**self.serde_conf(), **_SERIALIZER_STRICTNESS}
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


# What the library's serializer is told, and what it then passes to fastavro's writer.
_SERIALIZER_STRICTNESS = {"validate.strict": False, "validate.strict.allow.default": True}
_WRITER_STRICTNESS = {"strict": False, "strict_allow_default": True}


def _type_name(schema: Any) -> str:
    """``double``, ``demo.Order``, ``array``: what a validation error's schema expected."""
    if isinstance(schema, dict):
        return str(schema.get("name") or schema.get("type"))
    return "a union" if isinstance(schema, list) else str(schema)


def _is_record(parsed: Any) -> bool:
    return isinstance(parsed, dict) and parsed.get("type") == "record"


def _no_loads(data: bytes) -> Any:
    """An output codec reads nothing; the fused loop never calls this for an output role."""
    raise NotImplementedError("an avro output codec does not decode")


def _no_dumps(value: Any) -> bytes:
    """An input codec writes nothing; the fused loop never calls this for an input role."""
    raise NotImplementedError("an avro input codec does not encode")
