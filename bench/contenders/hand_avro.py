"""The hand-written loop's Avro values: the Confluent wire format (magic byte 0, 4-byte schema
ID, Avro body) with fastavro's ``schemaless_reader``/``schemaless_writer`` called directly, one
call per record each way: the least per-record work an Avro loop on fastavro can do.

Input: each writer schema is fetched from the registry once by its ID and parsed once. Output:
the ``--schema`` file is registered under ``<output topic>-value`` once at start (the
TopicNameStrategy), its ID written in every record's header. No reader schema (the record is
read with its writer schema), no validation beyond fastavro's writer: a benchmark peer, not a
codec.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from fastavro import parse_schema, schemaless_reader, schemaless_writer

MAGIC = 0


def header(schema_id: int) -> bytes:
    """The 5-byte Confluent wire-format header of ``schema_id``."""
    return bytes([MAGIC]) + schema_id.to_bytes(4, "big")


def schema_id_of(data: bytes) -> int:
    """The schema ID in ``data``'s header; ValueError if ``data`` is not in the wire format."""
    if len(data) < 5 or data[0] != MAGIC:
        raise ValueError(f"not the Confluent wire format: {data[:5]!r}")
    return int.from_bytes(data[1:5], "big")


class AvroValues:
    """``loads``/``dumps`` of Avro values: ``writer`` (parsed) and its registry ID for the
    output, ``fetch`` (schema ID -> parsed writer schema) called once per input schema ID."""

    def __init__(self, writer: Any, schema_id: int, fetch: Callable[[int], Any]) -> None:
        self._writer, self._header, self._fetch = writer, header(schema_id), fetch
        self._readers: dict[int, Any] = {}  # writer schema ID -> parsed schema

    def loads(self, data: bytes) -> Any:
        schema_id = schema_id_of(data)
        schema = self._readers.get(schema_id)
        if schema is None:
            schema = self._readers[schema_id] = self._fetch(schema_id)
        return schemaless_reader(io.BytesIO(data[5:]), schema, None, False)

    def dumps(self, value: Any) -> bytes:
        out = io.BytesIO()
        out.write(self._header)
        schemaless_writer(out, self._writer, value)
        return out.getvalue()


def parse(text: str) -> Any:
    """An Avro schema's JSON text, parsed by fastavro."""
    return parse_schema(json.loads(text))


def from_registry(url: str, schema_file: str | Path, topic: str) -> AvroValues:
    """Avro values behind the registry at ``url``: ``schema_file`` registered under
    ``<topic>-value`` now, input writer schemas fetched by ID when first seen."""
    client = SchemaRegistryClient({"url": url})
    text = Path(schema_file).read_text()
    schema_id = client.register_schema(f"{topic}-value", Schema(text, "AVRO"))

    def fetch(writer_id: int) -> Any:
        fetched = client.get_schema(writer_id).schema_str
        if fetched is None:
            raise ValueError(f"schema ID {writer_id}: the registry returned no schema text")
        return parse(fetched)

    return AvroValues(parse(text), schema_id, fetch)
