"""The tools speak the registry formats (issue 29, point 5): ``produce --value-format avro
--schema F``, ``tail --value-format`` and ``verify --input-format/--output-format`` against a
real broker and a real Schema Registry, run as subprocesses; the test reads back with
confluent-kafka's own deserializers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.serde.protobuf import compile_proto
from tests.support.cli import eos_bridge
from tests.support.kafka import KafkaFixture
from tests.support.registry import RegistryFixture

pytestmark = pytest.mark.integration

ORDER = {
    "type": "record", "name": "Order", "namespace": "demo",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"}],
}  # fmt: skip
ORDER_PROTO = (
    'syntax = "proto3";\npackage demo;\nmessage Order { string id = 1; int64 amount = 2; }\n'
)


def _lines(n: int) -> str:
    return "".join(json.dumps({"id": f"o{i}", "amount": i}) + "\n" for i in range(n))


def test_produce_tail_and_verify_in_avro(
    kafka: KafkaFixture, registry: RegistryFixture, tmp_path: Path
) -> None:
    env = {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap, "BRIDGE_SCHEMA_REGISTRY__URL": registry.url}
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps(ORDER))
    src, out = kafka.create_topic(partitions=2), kafka.create_topic(partitions=2)
    avro = ["--value-format", "avro", "--schema", str(schema)]
    for topic in (src, out):
        produced = eos_bridge(
            "produce", topic, "--key-field", "id", *avro, stdin=_lines(20), env=env
        )
        assert produced.code == 0, produced.stderr
    read = AvroDeserializer(registry.client())
    ctx = SerializationContext(src, MessageField.VALUE)
    got = sorted((read(r.value, ctx)["amount"], r.key) for r in kafka.read_all(src))
    assert got == [(i, f"o{i}".encode()) for i in range(20)]

    tail = eos_bridge(
        "tail", src, "--from-beginning", "--exit-at-end", "--value-format", "avro", env=env
    )
    assert tail.code == 0, tail.stderr
    assert sorted(json.loads(line)["amount"] for line in tail.stdout.splitlines()) == list(
        range(20)
    )

    formats = ["--input-format", "avro", "--output-format", "avro", "--id-field", "id"]
    verified = eos_bridge("verify", "--input", src, "--output", out, *formats, env=env)
    assert verified.code == 0, verified.stdout + verified.stderr
    extra = eos_bridge("produce", out, *avro, stdin=_lines(1), env=env)  # o0 a second time
    assert extra.code == 0, extra.stderr
    duplicated = eos_bridge("verify", "--input", src, "--output", out, *formats, env=env)
    assert duplicated.code == 1 and "o0" in duplicated.stdout, duplicated.stdout


def test_produce_in_protobuf_and_its_mistakes_in_one_line(
    kafka: KafkaFixture, registry: RegistryFixture, tmp_path: Path
) -> None:
    env = {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap}
    proto = tmp_path / "order.proto"
    proto.write_text(ORDER_PROTO)
    topic = kafka.create_topic()
    args = ["--value-format", "protobuf", "--schema", str(proto), "--registry", registry.url]
    produced = eos_bridge("produce", topic, *args, stdin=_lines(5), env=env)
    assert produced.code == 0, produced.stderr
    read = ProtobufDeserializer(compile_proto(proto), {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert sorted(read(r.value, ctx).amount for r in kafka.read_all(topic)) == list(range(5))

    no_registry = eos_bridge("produce", topic, *args[:4], stdin=_lines(1), env=env)
    assert no_registry.code == 2 and "--registry" in no_registry.one_line_error()
    bad = _lines(2) + json.dumps({"id": "x", "amount": "not a number"}) + "\n"
    refused = eos_bridge("produce", topic, *args, stdin=bad, env=env)
    assert refused.code == 2 and "record 3" in refused.one_line_error(), refused.stderr
    assert len(kafka.read_all(topic)) == 5  # nothing of the refused input was sent


PAYMENT = {
    "type": "record", "name": "Payment", "namespace": "demo",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
}  # fmt: skip


def test_produce_refuses_a_value_its_avro_schema_does_not_type_exactly(
    kafka: KafkaFixture, registry: RegistryFixture, tmp_path: Path
) -> None:
    """fastavro's writer would write "12.50" as 12.5; the tool names the record and field."""
    schema = tmp_path / "payment.avsc"
    schema.write_text(json.dumps(PAYMENT))
    topic = kafka.create_topic()
    args = ["--value-format", "avro", "--schema", str(schema), "--registry", registry.url]
    lines = json.dumps({"id": "p1", "amount": 3.5}) + "\n"
    lines += json.dumps({"id": "p2", "amount": "12.50"}) + "\n"
    refused = eos_bridge(
        "produce", topic, *args, stdin=lines, env={"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap}
    )
    error = refused.one_line_error()
    assert refused.code == 2 and "record 2" in error and "demo.Payment.amount" in error, error
    assert "'12.50'" in error and "double" in error, error
    assert kafka.read_all(topic) == []  # nothing was sent


def test_tail_without_value_format_names_the_format_of_a_framed_topic(
    kafka: KafkaFixture, registry: RegistryFixture, tmp_path: Path
) -> None:
    schema = tmp_path / "order.avsc"
    schema.write_text(json.dumps(ORDER))
    topic = kafka.create_topic()
    env = {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap}
    avro = ["--value-format", "avro", "--schema", str(schema), "--registry", registry.url]
    produced = eos_bridge("produce", topic, *avro, stdin=_lines(2), env=env)
    assert produced.code == 0, produced.stderr
    schema_id = int.from_bytes((kafka.read_all(topic)[0].value or b"")[1:5], "big")
    tail = ["tail", topic, "--from-beginning", "--exit-at-end"]

    named = eos_bridge(*tail, "--registry", registry.url, env=env)
    error = named.one_line_error()
    assert named.code == 2 and named.stdout == "", named.stdout  # no binary on the terminal
    assert f"schema ID {schema_id}" in error and "add --value-format avro" in error, error
    unnamed = eos_bridge(*tail, env=env)  # no registry to ask: the three formats and --registry
    error = unnamed.one_line_error()
    assert unnamed.code == 2 and f"schema ID {schema_id}" in error and "--registry" in error, error
