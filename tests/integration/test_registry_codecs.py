"""The registry codecs against a real Schema Registry (Apicurio 2.4.2 from devkit.registry).

Every value written by a codec is read back by confluent-kafka's own deserializers with a
client of the test's own; every failure is asserted by its class, never by message text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.errors import OutputNotEncodable
from app.serde.avro import AvroCodec
from app.serde.base import Role
from app.serde.json_schema import JsonSchemaCodec
from app.serde.protobuf import ProtobufCodec, compile_proto, to_dict
from app.serde.registry import (
    NotWireFormat,
    RecordUndecodable,
    RegistryCertificateRefused,
    RegistrySettings,
    RegistryUnavailable,
    SchemaIncompatible,
    SchemaNotRegistered,
    SchemaSettings,
    SubjectStrategy,
    UnknownSchemaId,
    parse_header,
)
from app.serde.translate import SchemaTranslator, passthrough
from devkit.registry import LocalRegistry
from tests.support.registry import RegistryFixture

pytestmark = pytest.mark.integration

USER_V1 = {
    "type": "record", "name": "User", "namespace": "demo",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}  # fmt: skip
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "tier", "type": "string", "default": "basic"}],
}
USER_PROTO = """syntax = "proto3";
package demo;
message User {
  int64 id = 1;
  string name = 2;
  repeated string tags = 3;
}
"""
USER_JSON = {
    "title": "User", "type": "object", "additionalProperties": False,
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
}  # fmt: skip


def write(tmp_path: Path, name: str, content: object) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def value_context(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


@pytest.fixture
def avro_file(tmp_path: Path) -> Path:
    return write(tmp_path, "user.avsc", USER_V1)


# ---- round trips ----------------------------------------------------------------------------


def test_avro_round_trip_reads_back_with_the_library(
    registry: RegistryFixture, avro_file: Path
) -> None:
    topic = registry.unique("avro")
    codec = AvroCodec(registry.settings(), SchemaSettings(schema_file=avro_file))
    records = [{"id": i, "name": f"user-{i}"} for i in (1, 2**40)]
    encoded = [codec.encode(r, topic) for r in records]
    reader = AvroDeserializer(registry.client())
    assert [reader(e, value_context(topic)) for e in encoded] == records
    assert [codec.decode(e, topic) for e in encoded] == records
    latest = registry.client().get_latest_version(f"{topic}-value")
    assert {parse_header(e or b"") for e in encoded} == {latest.schema_id}


def test_protobuf_round_trip_with_and_without_a_reader_proto(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    topic = registry.unique("proto")
    schema = SchemaSettings(schema_file=write(tmp_path, "user.proto", USER_PROTO))
    codec = ProtobufCodec(registry.settings(), schema)
    record = {"id": 2**40, "name": "ada", "tags": ["a", "b"]}
    encoded = codec.encode(record, topic)
    message = ProtobufDeserializer(compile_proto(tmp_path / "user.proto"), {}, registry.client())(
        encoded, value_context(topic)
    )
    assert to_dict(message) == record
    assert codec.decode(encoded, topic) == record
    # A reader that has no .proto builds the class from the registered writer schema.
    writer_only = ProtobufCodec(registry.settings(), SchemaSettings())
    assert writer_only.decode(encoded, topic) == record
    assert writer_only.decode(codec.encode({"id": 3}, topic), topic) == {
        "id": 3, "name": "", "tags": [],
    }  # fmt: skip


def test_json_schema_round_trip_reads_back_with_the_library(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    topic = registry.unique("json")
    schema = SchemaSettings(schema_file=write(tmp_path, "user.json", USER_JSON))
    codec = JsonSchemaCodec(registry.settings(), schema)
    record = {"id": 7, "name": "ada"}
    encoded = codec.encode(record, topic)
    reader = JSONDeserializer(None, schema_registry_client=registry.client())
    assert reader(encoded, value_context(topic)) == record
    assert codec.decode(encoded, topic) == record


# ---- evolution ------------------------------------------------------------------------------


def test_avro_v1_and_v2_records_read_with_the_v2_reader_get_defaults(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    topic = registry.unique("evolve")
    old_writer = AvroSerializer(registry.client(), json.dumps(USER_V1))
    old = [old_writer({"id": i, "name": f"v1-{i}"}, value_context(topic)) for i in range(3)]
    v2 = SchemaSettings(schema_file=write(tmp_path, "v2.avsc", USER_V2))
    codec = AvroCodec(registry.settings(), v2)  # writes v2, reads everything as v2
    new = [codec.encode({"id": 10 + i, "name": "v2", "tier": "gold"}, topic) for i in range(2)]
    assert len({parse_header(b or b"") for b in old + new}) == 2  # two writer schemas
    decoded = [codec.decode(b, topic) for b in old + new]
    assert decoded == [{"id": i, "name": f"v1-{i}", "tier": "basic"} for i in range(3)] + [
        {"id": 10 + i, "name": "v2", "tier": "gold"} for i in range(2)
    ]


def test_protobuf_records_read_with_a_newer_reader_proto_get_defaults(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    topic = registry.unique("proto-evolve")
    writer = ProtobufCodec(
        registry.settings(), SchemaSettings(schema_file=write(tmp_path, "v1.proto", USER_PROTO))
    )
    encoded = writer.encode({"id": 5, "name": "ada"}, topic)
    v2 = USER_PROTO.replace("}\n", "  string tier = 4;\n}\n")
    reader = ProtobufCodec(
        registry.settings(), SchemaSettings(schema_file=write(tmp_path, "v2.proto", v2))
    )
    assert reader.decode(encoded, topic) == {"id": 5, "name": "ada", "tags": [], "tier": ""}


def test_a_closed_json_schema_may_add_a_property_under_backward(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    topic = registry.unique("json-evolve")
    v1 = SchemaSettings(schema_file=write(tmp_path, "v1.json", USER_JSON))
    old = JsonSchemaCodec(registry.settings(), v1).encode({"id": 1, "name": "a"}, topic)
    props = {**USER_JSON["properties"], "tier": {"type": "string"}}  # type: ignore[dict-item]
    v2 = SchemaSettings(schema_file=write(tmp_path, "v2.json", {**USER_JSON, "properties": props}))
    codec = JsonSchemaCodec(registry.settings(), v2)
    new = codec.encode({"id": 2, "name": "b", "tier": "gold"}, topic)
    assert parse_header(old or b"") != parse_header(new or b"")
    assert [codec.decode(b, topic) for b in (old, new)] == [
        {"id": 1, "name": "a"}, {"id": 2, "name": "b", "tier": "gold"},
    ]  # fmt: skip


def test_a_key_codec_registers_the_key_subject(registry: RegistryFixture, tmp_path: Path) -> None:
    topic = registry.unique("keys")
    key_schema = SchemaSettings(schema_file=write(tmp_path, "key.avsc", '"string"'))
    codec = AvroCodec(registry.settings(), key_schema, Role.OUTPUT_KEY)
    encoded = codec.encode("customer-7", topic)
    assert (
        parse_header(encoded or b"")
        == registry.client().get_latest_version(f"{topic}-key").schema_id
    )
    assert codec.decode(encoded, topic) == "customer-7"


# ---- record errors --------------------------------------------------------------------------


def test_records_not_in_the_wire_format_or_with_unknown_ids_are_record_errors(
    registry: RegistryFixture, avro_file: Path
) -> None:
    topic = registry.unique("bad")
    codec = AvroCodec(registry.settings(), SchemaSettings(schema_file=avro_file))
    good = codec.encode({"id": 1, "name": "x"}, topic)
    assert good is not None
    with pytest.raises(NotWireFormat):
        codec.decode(b"\x01" + good[1:], topic)  # wrong magic byte
    with pytest.raises(NotWireFormat):
        codec.decode(good[:3], topic)  # truncated header
    with pytest.raises(NotWireFormat):
        codec.decode(b'{"id": 1}', topic)  # plain JSON
    with pytest.raises(UnknownSchemaId):
        codec.decode(b"\x00" + (2**31 - 7).to_bytes(4, "big") + good[5:], topic)
    with pytest.raises(RecordUndecodable):
        codec.decode(good[:6], topic)  # truncated payload


@pytest.mark.parametrize(
    "value",
    [{"id": "one", "name": "x"}, {"id": 1}, {"id": 1, "name": "x", "extra": True}, [1, 2]],
    ids=["wrong-type", "missing-field", "unknown-field", "not-a-record"],
)
def test_avro_output_that_does_not_match_is_not_encodable(
    registry: RegistryFixture, avro_file: Path, value: Any
) -> None:
    codec = AvroCodec(registry.settings(), SchemaSettings(schema_file=avro_file))
    with pytest.raises(OutputNotEncodable):
        codec.encode(value, registry.unique("out"))


def test_protobuf_and_json_schema_output_that_does_not_match_is_not_encodable(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    proto = SchemaSettings(schema_file=write(tmp_path, "user.proto", USER_PROTO))
    json_schema = SchemaSettings(schema_file=write(tmp_path, "user.json", USER_JSON))
    codecs: list[tuple[Callable[..., Any], Any]] = [
        (ProtobufCodec(registry.settings(), proto).encode, {"id": 1, "nope": 2}),
        (ProtobufCodec(registry.settings(), proto).encode, {"id": "not a number"}),
        (JsonSchemaCodec(registry.settings(), json_schema).encode, {"id": 1}),
        (JsonSchemaCodec(registry.settings(), json_schema).encode, {"id": 1, "name": 2}),
    ]
    for encode, value in codecs:
        with pytest.raises(OutputNotEncodable):
            encode(value, registry.unique("out"))


# ---- registry errors ------------------------------------------------------------------------


def test_a_stopped_registry_is_unavailable_not_a_record_error(
    make_registry: Callable[[], RegistryFixture], avro_file: Path
) -> None:
    private = make_registry()
    topic = private.unique("down")
    writer = AvroCodec(private.settings(), SchemaSettings(schema_file=avro_file))
    encoded = writer.encode({"id": 1, "name": "x"}, topic)
    private.stop()
    reader = AvroCodec(private.settings(), SchemaSettings())  # has no schema cached yet
    with pytest.raises(RegistryUnavailable):
        reader.decode(encoded, topic)
    with pytest.raises(RegistryUnavailable):
        writer.encode({"id": 2, "name": "y"}, private.unique("other"))
    with pytest.raises(RegistryUnavailable):
        writer.prepare(private.unique("other"))


def test_an_incompatible_schema_is_refused_at_start_naming_the_subject(
    registry: RegistryFixture, tmp_path: Path, avro_file: Path
) -> None:
    topic = registry.unique("refuse")
    AvroCodec(registry.settings(), SchemaSettings(schema_file=avro_file)).prepare(topic)
    changed = {**USER_V1, "fields": [{"name": "id", "type": "string"}]}  # not BACKWARD
    codec = AvroCodec(
        registry.settings(), SchemaSettings(schema_file=write(tmp_path, "bad.avsc", changed))
    )
    with pytest.raises(SchemaIncompatible) as refused:
        codec.prepare(topic)
    assert f"{topic}-value" in str(refused.value)
    with pytest.raises(SchemaIncompatible):
        codec.encode({"id": "1"}, topic)


def test_subject_strategies_name_the_registered_subject(
    registry: RegistryFixture, avro_file: Path
) -> None:
    topic = registry.unique("strategy")
    expected = {
        SubjectStrategy.TOPIC: f"{topic}-value",
        SubjectStrategy.RECORD: "demo.User",
        SubjectStrategy.TOPIC_RECORD: f"{topic}-demo.User",
    }
    for strategy, subject in expected.items():
        settings = SchemaSettings(schema_file=avro_file, subject_strategy=strategy)
        encoded = AvroCodec(registry.settings(), settings).encode({"id": 1, "name": "x"}, topic)
        registered = registry.client().get_latest_version(subject)
        assert parse_header(encoded or b"") == registered.schema_id


def test_a_registry_over_tls_needs_its_ca(tmp_path: Path, avro_file: Path) -> None:
    secure = LocalRegistry(tmp_path / "tls-registry", secure=True).start()
    try:
        assert secure.url.startswith("https://")
        trusted = RegistrySettings(url=secure.url, ca_location=secure.ca)
        codec = AvroCodec(trusted, SchemaSettings(schema_file=avro_file))
        assert codec.decode(codec.encode({"id": 1, "name": "x"}, "tls"), "tls") == {
            "id": 1, "name": "x",
        }  # fmt: skip
        untrusted = AvroCodec(
            RegistrySettings(url=secure.url), SchemaSettings(schema_file=avro_file)
        )
        with pytest.raises(RegistryCertificateRefused):
            untrusted.prepare("tls")
    finally:
        secure.stop()


# ---- translation ----------------------------------------------------------------------------


def test_translation_gives_the_target_registrys_id_for_the_same_schema(
    registry: RegistryFixture,
    make_registry: Callable[[], RegistryFixture],
    avro_file: Path,
    tmp_path: Path,
) -> None:
    target = make_registry()
    # Shift the target's IDs so that the same schema cannot get the same ID by chance.
    for i in range(3):
        filler = {"type": "record", "name": f"Filler{i}", "fields": []}
        target.client().register_schema(f"filler-{i}", Schema(json.dumps(filler), "AVRO"))
    avro = SchemaSettings(schema_file=avro_file)
    proto = SchemaSettings(schema_file=write(tmp_path, "user.proto", USER_PROTO))
    sources = [
        (AvroCodec(registry.settings(), avro), {"id": 1, "name": "a"}),
        (ProtobufCodec(registry.settings(), proto), {"id": 2, "name": "b", "tags": ["t"]}),
    ]
    for codec, record in sources:
        topic = registry.unique(f"translate-{codec.name}")  # one format per subject
        source_bytes = codec.encode(record, topic)
        assert source_bytes is not None
        translator = SchemaTranslator(
            registry.settings(), target.settings(), SchemaSettings(), Role.OUTPUT_VALUE
        )
        out = translator.translate(source_bytes, topic)
        assert out is not None
        source_id, target_id = parse_header(source_bytes), parse_header(out)
        assert source_id != target_id
        same = registry.client().get_schema(source_id).schema_str
        assert target.client().get_schema(target_id).schema_str == same
        assert type(codec)(target.settings(), SchemaSettings()).decode(out, topic) == record
        assert translator.translate(source_bytes, topic) == out  # cached mapping, same answer
        assert passthrough(source_bytes, topic) is source_bytes
    with pytest.raises(NotWireFormat):
        translator.translate(b"not registry bytes", topic)
    with pytest.raises(UnknownSchemaId):
        translator.translate(b"\x00" + (2**31 - 7).to_bytes(4, "big") + b"\x02", topic)
    lookup_only = SchemaTranslator(
        registry.settings(), target.settings(), SchemaSettings(auto_register=False)
    )
    with pytest.raises(SchemaNotRegistered):  # absent under this topic's subject in the target
        lookup_only.translate(source_bytes, registry.unique("elsewhere"))


# ---- the fused loop's Avro decode -----------------------------------------------------------


def test_the_fused_avro_decode_reads_what_the_library_reads_and_refuses_what_it_refuses(
    registry: RegistryFixture, tmp_path: Path
) -> None:
    topic = registry.unique("avro-inline")
    ctx = value_context(topic)
    v1 = AvroSerializer(registry.client(), json.dumps(USER_V1))({"id": 1, "name": "a"}, ctx)
    v2 = AvroSerializer(registry.client(), json.dumps(USER_V2))(
        {"id": 2, "name": "b", "tier": "gold"}, ctx
    )
    reader_file = write(tmp_path, "user-v2.avsc", USER_V2)
    for schema_file in (None, reader_file):
        codec = AvroCodec(
            registry.settings(), SchemaSettings(schema_file=schema_file), Role.INPUT_VALUE
        )
        assert codec.inline is not None
        library = AvroDeserializer(
            registry.client(), None if schema_file is None else json.dumps(USER_V2)
        )
        for data in (v1, v2, v1):  # the second v1: the parsed schemas come from the cache
            assert codec.inline.loads(data) == library(data, ctx) == codec.decode(data, topic)
        # The header rule, byte for byte: refused by the fused decode iff the library refuses.
        unknown = b"\x00" + (2**31 - 9).to_bytes(4, "big") + b"\x02"
        for bad in (b"", b"\x00", v1[:5], b"\x01" + v1[1:], unknown, v1[:6]):
            with pytest.raises(Exception):  # noqa: B017 (any: the fused loop falls back)
                library(bad, ctx)
            with pytest.raises(Exception):  # noqa: B017
                codec.inline.loads(bad)
    assert AvroCodec(registry.settings(), SchemaSettings(), Role.OUTPUT_VALUE).inline is None
