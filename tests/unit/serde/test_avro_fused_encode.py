"""The fused loop's Avro encode writes what confluent-kafka's ``AvroSerializer`` writes, byte
for byte, on many schemas and records, and refuses what it refuses (pure: the registry is an
in-memory stand-in that hands out one ID per subject and schema)."""

from __future__ import annotations

import json
import random
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import RegisteredSchema, Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.serde.avro import AvroCodec
from app.serde.base import Role
from app.serde.registry import RegistrySettings, SchemaSettings

TOPIC = "orders"


class Ids:
    """The registry calls the serializer and the codec make: one ID per (subject, schema)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}
        self.calls = 0

    def register_schema(self, subject: str, schema: Schema, normalize_schemas: bool = False) -> int:
        self.calls += 1
        return self.ids.setdefault((subject, schema.schema_str or ""), 1000 + len(self.ids) * 7)

    def register_schema_full_response(
        self, subject: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        return RegisteredSchema(subject, 1, self.register_schema(subject, schema), None, schema)

    def get_associations_by_resource_name(self, **_: object) -> list[object]:
        return []  # no topic associations: the library's default strategy names <topic>-value

    def close(self) -> None:
        pass


def _rec(name: str, *fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "t", "fields": list(fields)}


SCHEMAS: dict[str, dict[str, Any]] = {
    "primitives": _rec(
        "P", {"name": "s", "type": "string"}, {"name": "i", "type": "int"},
        {"name": "l", "type": "long"}, {"name": "f", "type": "float"},
        {"name": "d", "type": "double"}, {"name": "b", "type": "boolean"},
        {"name": "raw", "type": "bytes"}, {"name": "n", "type": "null"},
    ),
    "unions_and_defaults": _rec(
        "U", {"name": "id", "type": "string"},
        {"name": "amount", "type": ["null", "long"], "default": None},
        {"name": "either", "type": ["string", "int", "double"]},
        {"name": "channel", "type": "string", "default": "web"},
    ),
    "nested": _rec(
        "N", {"name": "id", "type": "long"},
        {"name": "item", "type": _rec("Item", {"name": "sku", "type": "string"},
                                      {"name": "qty", "type": "int"})},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "items", "type": {"type": "array", "items": "t.Item"}},
    ),
    "enum_fixed_logical": _rec(
        "E", {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "h", "type": {"type": "fixed", "name": "H", "size": 4}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 9, "scale": 2}},
    ),
}  # fmt: skip


def _value(schema: Any, rng: random.Random, named: dict[str, Any]) -> Any:
    """A random value of ``schema`` (the Python form both writers take)."""
    if isinstance(schema, str):
        if schema in named:
            return _value(named[schema], rng, named)
        return _PRIMITIVES[schema](rng)
    if isinstance(schema, list):
        return _value(rng.choice(schema), rng, named)
    kind = schema["type"]
    logical = schema.get("logicalType")
    if logical == "timestamp-millis":
        return rng.randrange(0, 2**41)
    if logical == "date":
        return rng.randrange(0, 30_000)
    if logical == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128)))
    if logical == "decimal":
        return Decimal(rng.randrange(-(10**8), 10**8)).scaleb(-2)
    if kind == "record":
        named[f"{schema.get('namespace', 't')}.{schema['name']}"] = schema
        return {f["name"]: _value(f["type"], rng, named) for f in schema["fields"]}
    if kind == "array":
        return [_value(schema["items"], rng, named) for _ in range(rng.randrange(4))]
    if kind == "map":
        return {f"k{i}": _value(schema["values"], rng, named) for i in range(rng.randrange(4))}
    if kind == "enum":
        return rng.choice(schema["symbols"])
    if kind == "fixed":
        return rng.randbytes(schema["size"])
    return _value(kind, rng, named)


_PRIMITIVES = {
    "string": lambda r: "".join(r.choice("aé€😀b ") for _ in range(r.randrange(12))),
    "int": lambda r: r.randrange(-(2**31), 2**31),
    "long": lambda r: r.randrange(-(2**63), 2**63),
    "float": lambda r: r.choice([0.0, -1.5, 3.25, float("inf")]),
    "double": lambda r: r.uniform(-1e12, 1e12),
    "boolean": lambda r: r.random() < 0.5,
    "bytes": lambda r: r.randbytes(r.randrange(10)),
    "null": lambda r: None,
}


def _pair(tmp_path: Path, schema: dict[str, Any]) -> tuple[AvroCodec, AvroSerializer, Ids]:
    """A prepared output codec and the library's serializer on the same stand-in registry."""
    path = tmp_path / f"{schema['name']}.avsc"
    path.write_text(json.dumps(schema))
    ids = Ids()
    settings = RegistrySettings(url="http://registry.invalid")
    codec = AvroCodec(settings, SchemaSettings(schema_file=path), Role.OUTPUT_VALUE, ids)  # type: ignore[arg-type]
    codec.prepare(TOPIC)
    conf = {"validate.strict.allow.default": True}
    library = AvroSerializer(ids, json.dumps(schema), conf=conf)  # type: ignore[arg-type]
    return codec, library, ids


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_fused_encode_writes_the_librarys_bytes(tmp_path: Path, name: str) -> None:
    codec, library, ids = _pair(tmp_path, SCHEMAS[name])
    assert codec.inline is not None and codec.inline.per_topic
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    rng = random.Random(name)
    for _ in range(300):
        value = _value(SCHEMAS[name], rng, {})
        assert codec.inline.dumps(value) == library(value, ctx) == codec.encode(value, TOPIC)
    assert ids.calls <= 3  # the schema is registered once, not per record


BAD = [
    {"id": 1, "either": "x"},  # wrong type
    {"id": "a"},  # a field without default missing
    {"id": "a", "either": "x", "surprise": 1},  # an unknown field
    {"id": "a", "either": [1]},  # no union branch fits
]


@pytest.mark.parametrize("value", BAD, ids=["type", "missing", "unknown", "union"])
def test_the_fused_encode_refuses_what_the_library_refuses(
    tmp_path: Path, value: dict[str, Any]
) -> None:
    codec, library, _ = _pair(tmp_path, SCHEMAS["unions_and_defaults"])
    assert codec.inline is not None
    with pytest.raises(Exception):  # noqa: B017 (any: the fused loop falls back to encode)
        library(value, SerializationContext(TOPIC, MessageField.VALUE))
    with pytest.raises(Exception):  # noqa: B017
        codec.inline.dumps(value)


def test_a_missing_null_field_without_default_is_refused_as_by_the_library(
    tmp_path: Path,
) -> None:
    """fastavro alone would write null for it; the library's strictness refuses it."""
    codec, library, _ = _pair(tmp_path, SCHEMAS["primitives"])
    assert codec.inline is not None
    value = _value(SCHEMAS["primitives"], random.Random(5), {})
    del value["n"]
    with pytest.raises(Exception):  # noqa: B017
        library(value, SerializationContext(TOPIC, MessageField.VALUE))
    with pytest.raises(Exception):  # noqa: B017
        codec.inline.dumps(value)


def test_defaults_fill_missing_fields_as_the_library_does(tmp_path: Path) -> None:
    codec, library, _ = _pair(tmp_path, SCHEMAS["unions_and_defaults"])
    assert codec.inline is not None
    value = {"id": "a", "either": 3}
    assert codec.inline.dumps(value) == library(
        value, SerializationContext(TOPIC, MessageField.VALUE)
    )


def test_no_fused_encode_for_latest_version_keys_or_inputs(tmp_path: Path) -> None:
    path = tmp_path / "s.avsc"
    path.write_text(json.dumps(SCHEMAS["nested"]))
    settings, ids = RegistrySettings(url="http://registry.invalid"), Ids()
    key = AvroCodec(settings, SchemaSettings(schema_file=path), Role.OUTPUT_KEY, ids)  # type: ignore[arg-type]
    key.prepare(TOPIC)
    assert key.inline is None
    unprepared = AvroCodec(settings, SchemaSettings(schema_file=path), Role.OUTPUT_VALUE, ids)  # type: ignore[arg-type]
    assert unprepared.inline is None  # no schema ID yet: encode() until prepare()


def test_the_fused_loop_encodes_routed_records_with_the_codec(tmp_path: Path) -> None:
    """``dumps`` writes the output topic's schema ID: a record routed elsewhere is encoded by
    ``encode`` with its own topic (its own subject)."""
    from dataclasses import replace

    from app.pipeline.fusion import _encode_expr
    from app.serde import formats

    codec, _, _ = _pair(tmp_path, SCHEMAS["nested"])
    avro_out = replace(formats(), value_out=codec)
    assert _encode_expr(avro_out, "default") == "dumps(v)"
    assert _encode_expr(avro_out, "t or default") == (
        "(dumps(v) if (t or default) == default else encode(v, t or default))"
    )
    assert _encode_expr(formats(), "t or default") == "dumps(v)"  # JSON: no topic in the bytes
