"""Schema-ID translation between two registries, end to end (issue 29, acceptance 4): a real
broker, two real Schema Registries (Apicurio, devkit.registry) whose IDs differ for the same
schema, the bridge as a subprocess with ``target_registry`` set.

The test writes with confluent-kafka's own serializers into the source registry and reads the
output with its own deserializers and a client of the target registry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.serde.protobuf import compile_proto
from app.serde.registry import parse_header
from app.sink.output import H_CLASS
from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, bridge_topics, wait_caught_up
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.registry import RegistryFixture, start_registry
from tests.support.xcluster import xcaught_up

pytestmark = pytest.mark.integration

ORDER = {
    "type": "record", "name": "Order", "namespace": "demo",
    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"}],
}  # fmt: skip
ORDER_PROTO = """syntax = "proto3";
package demo;
message Other { string x = 1; }
message OrderP {
  string id = 1;
  int64 amount = 2;
}
"""


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryFixture]:
    """A second registry whose IDs are shifted: the same schema cannot get the same ID."""
    started = start_registry(tmp_path_factory.mktemp("target-registry"))
    try:
        for i in range(5):
            filler = {"type": "record", "name": f"Filler{i}", "fields": []}
            started.client().register_schema(f"filler-{i}", Schema(json.dumps(filler), "AVRO"))
        yield started
    finally:
        started.stop()


def _avro_orders(registry: RegistryFixture, topic: str, prefix: str, n: int) -> list[bytes]:
    """``n`` orders (id ``<prefix><i>``, amount ``i``) as confluent-kafka's Avro serializer
    writes them for ``topic`` with the source registry's IDs."""
    write = AvroSerializer(registry.client(), json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [write({"id": f"{prefix}{i}", "amount": i}, ctx) for i in range(n)]


def _translating(
    kafka: KafkaFixture,
    topics: tuple[str, str, str],
    registry: RegistryFixture,
    target: RegistryFixture,
    /,
    **extra: object,
) -> dict[str, Any]:
    """The settings of a bridge from ``registry``'s IDs to ``target``'s (``extra`` may hold
    the bridge's own ``target`` setting, another cluster)."""
    return base_settings(
        kafka, *topics, schema_registry={"url": registry.url},
        target_registry={"url": target.url}, **extra,
    )  # fmt: skip


def _run(bridges: MakeBridge, kafka: KafkaFixture, settings: dict[str, Any]) -> None:
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], settings["input_topics"][0], 120, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]


def _decoded(target: RegistryFixture, topic: str, values: list[bytes | None]) -> list[Any]:
    """``values`` read from ``topic`` with confluent-kafka's Avro deserializer and ``target``."""
    read = AvroDeserializer(target.client())
    return [read(v, SerializationContext(topic, MessageField.VALUE)) for v in values]


def _same_schema(source: RegistryFixture, target: RegistryFixture, data: bytes, out: bytes) -> bool:
    """``out``'s ID names in ``target`` the schema ``data``'s ID names in ``source``."""
    in_id, out_id = parse_header(data), parse_header(out)
    return in_id != out_id and (
        target.client().get_schema(out_id).schema_str
        == source.client().get_schema(in_id).schema_str
    )


def test_bytes_get_the_target_registrys_ids_and_passthrough_copies_them(
    kafka: KafkaFixture,
    registry: RegistryFixture,
    target: RegistryFixture,
    bridges: MakeBridge,
    tmp_path: Path,
) -> None:
    topics = src, out, dlq = bridge_topics(kafka)
    avro_values = _avro_orders(registry, src, "a", 100)
    proto_file = tmp_path / "order.proto"
    proto_file.write_text(ORDER_PROTO)
    order = compile_proto(proto_file, "demo.OrderP")
    proto = ProtobufSerializer(order, registry.client(), {"use.deprecated.format": False})
    # Another subject for the Protobuf schema (one subject holds one format).
    proto_ctx = SerializationContext(registry.unique("proto"), MessageField.VALUE)
    proto_values = [proto(order(id=f"p{i}", amount=i), proto_ctx) for i in range(100)]
    not_wire = b"\x07 not written by a registry"
    values = [*avro_values, not_wire, *proto_values]
    kafka.seed(src, values, [b"k%d" % i for i in range(len(values))])
    s = _translating(
        kafka, topics, registry, target, input_format="bytes", output_format="bytes",
        output_schema={"subject_strategy": "topic_record"},  # two schemas, one topic
    )  # fmt: skip
    _run(bridges, kafka, s)

    written = {r.key: r.value for r in kafka.read_all(out)}
    originals = dict(zip([b"k%d" % i for i in range(len(values))], values, strict=True))
    assert set(written) == set(originals) - {b"k100"}
    for key, data in written.items():
        assert data is not None and data[5:] == originals[key][5:], key  # payload untouched
        assert _same_schema(registry, target, originals[key], data), key
    [dead] = kafka.read_all(dlq)
    assert dead.value == not_wire and dead.header(H_CLASS) == b"OutputNotEncodable"
    decoded = _decoded(target, out, [written[b"k%d" % i] for i in range(100)])
    assert decoded == [{"id": f"a{i}", "amount": i} for i in range(100)]

    out2 = kafka.create_topic(kafka.unique("out"), 4)
    _run(bridges, kafka, {**s, "output_topic": out2, "group_id": kafka.unique("g"),
                          "schema_ids": "passthrough"})  # fmt: skip
    assert sorted(r.value for r in kafka.read_all(out2)) == sorted(values)


def test_decoded_records_are_encoded_with_the_target_registry(
    kafka: KafkaFixture,
    registry: RegistryFixture,
    target: RegistryFixture,
    bridges: MakeBridge,
    tmp_path: Path,
) -> None:
    topics = src, out, dlq = bridge_topics(kafka)
    schema_file = tmp_path / "order.avsc"
    schema_file.write_text(json.dumps(ORDER))
    values = _avro_orders(registry, src, "o", 200)
    kafka.seed(src, values, [b"o%d" % i for i in range(200)])
    s = _translating(
        kafka, topics, registry, target, input_format="avro", output_format="avro",
        output_schema={"schema_file": str(schema_file)},
    )  # fmt: skip
    _run(bridges, kafka, s)

    records = kafka.read_all(out)
    got = sorted(_decoded(target, out, [r.value for r in records]), key=lambda o: o["amount"])
    assert got == [{"id": f"o{i}", "amount": i} for i in range(200)]
    assert {_same_schema(registry, target, values[0], r.value or b"") for r in records} == {True}
    assert kafka.read_all(dlq) == []


def test_between_two_clusters_and_two_registries_exactly_once(
    kafka: KafkaFixture,
    target_kafka: KafkaFixture,
    registry: RegistryFixture,
    target: RegistryFixture,
    bridges: MakeBridge,
) -> None:
    """Avro in on the source cluster, Avro out on the target with the target registry's IDs,
    exactly once (positions in the target's offsets topic, one producer per input partition)."""
    src = kafka.create_topic(kafka.unique("in"), 2)
    out = target_kafka.create_topic(target_kafka.unique("out"), 2)
    dlq = target_kafka.create_topic(target_kafka.unique("dlq"), 1)
    values = _avro_orders(registry, src, "x", 500)
    kafka.seed(src, values, [b"x%d" % i for i in range(500)])
    s = _translating(
        kafka, (src, out, dlq), registry, target, input_format="bytes", output_format="bytes",
        processing_guarantee="exactly-once", target={"bootstrap_servers": target_kafka.bootstrap},
    )  # fmt: skip
    bridge = bridges(**s).start()
    wait_until(lambda: xcaught_up(kafka, target_kafka, s), 180, "the target's offsets at the end")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    records = target_kafka.read_all(out)  # read_committed
    got = [order["id"] for order in _decoded(target, out, [r.value for r in records])]
    assert sorted(got) == sorted(f"x{i}" for i in range(500))  # each once
    assert {_same_schema(registry, target, values[0], r.value or b"") for r in records} == {True}
