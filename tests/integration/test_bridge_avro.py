"""The bridge with Avro on both sides, end to end: a real broker, a real Schema Registry
(Apicurio, devkit.registry), the bridge as a subprocess (issue 29, acceptance 1 and 3).

The test writes its input with confluent-kafka's own ``AvroSerializer`` and reads the output
back with its own ``AvroDeserializer`` and a client of its own: the bridge's codecs are not
used to check themselves.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from app.serde.protobuf import compile_proto
from app.serde.registry import parse_header
from app.sink.output import H_CLASS, H_OFFSET, H_PARTITION
from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, bridge_topics, http_get, wait_caught_up
from tests.support.feed import Feeder, feed_and_catch_up, kill_in_open_transaction
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.registry import RegistryFixture

pytestmark = pytest.mark.integration

ORDER = {
    "type": "record", "name": "Order", "namespace": "demo",
    "fields": [
        {"name": "id", "type": "string"}, {"name": "user", "type": "string"},
        {"name": "amount", "type": ["null", "long"], "default": None},
    ],
}  # fmt: skip
ORDER_OUT = {  # what the bridge writes: amount required
    **ORDER, "name": "OrderOut",
    "fields": [*ORDER["fields"][:2], {"name": "amount", "type": "long"}],
}  # fmt: skip
COUNT_OUT = {
    "type": "record", "name": "UserCount", "namespace": "demo",
    "fields": [
        {"name": "key", "type": "string"}, {"name": "count", "type": "long"},
        {"name": "_source_topic", "type": "string"}, {"name": "_source_partition", "type": "int"},
        {"name": "_source_offset", "type": "long"},
    ],
}  # fmt: skip
COUNT_SPEC = """
steps:
  - key_by: user
  - count: {name: orders-per-user}
"""


def _schema_file(tmp_path: Path, schema: dict[str, Any]) -> str:
    path = tmp_path / f"{schema['name']}.avsc"
    path.write_text(json.dumps(schema))
    return str(path)


def _orders(registry: RegistryFixture, topic: str, n: int) -> tuple[list[bytes], list[bytes]]:
    """``n`` Avro orders written by confluent-kafka's serializer (registering ``<topic>-value``)."""
    write = AvroSerializer(registry.client(), json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    values, keys = [], []
    for i in range(n):
        user = f"user-{i % 50}"
        values.append(write({"id": f"o{i}", "user": user, "amount": i % 97}, ctx))
        keys.append(user.encode())
    return values, keys


def _read(registry: RegistryFixture, kafka: KafkaFixture, topic: str) -> list[dict[str, Any]]:
    """Every committed record of ``topic``, decoded by confluent-kafka's own deserializer."""
    read = AvroDeserializer(registry.client())
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [read(r.value, ctx) for r in kafka.read_all(topic)]


def _settings(
    kafka: KafkaFixture, registry: RegistryFixture, tmp_path: Path, out_schema: dict[str, Any],
    **extra: object,
) -> dict[str, Any]:  # fmt: skip
    src, out, dlq = bridge_topics(kafka)
    return base_settings(
        kafka, src, out, dlq, batch_size=500,
        schema_registry={"url": registry.url, "timeout": 3},
        output_schema={"schema_file": _schema_file(tmp_path, out_schema)},
        **{"input_format": "avro", "output_format": "avro", **extra},
    )  # fmt: skip


def test_avro_count_exactly_once_with_two_sigkills(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    s = _settings(kafka, registry, tmp_path, COUNT_OUT)
    src = s["input_topics"][0]
    _count_with_two_kills(
        kafka, bridges, tmp_path, s, *_orders(registry, src, 10_000),
        lambda out: _read(registry, kafka, out),
    )  # fmt: skip


def _count_with_two_kills(
    kafka: KafkaFixture,
    bridges: MakeBridge,
    tmp_path: Path,
    settings: dict[str, Any],
    values: list[bytes],
    keys: list[bytes],
    read: Callable[[str], list[dict[str, Any]]],
) -> None:
    """Count orders per user with the bridge SIGKILLed twice inside an open transaction (each
    kill waits for records on the output that only ``read_uncommitted`` sees: a condition the
    test controls, not a time); every input counted exactly once in what ``read`` decodes."""
    spec = tmp_path / "count.yaml"
    spec.write_text(COUNT_SPEC)
    s = {
        **settings, "pipeline_spec": str(spec), "state_dir": str(tmp_path / "state"),
        "commit_interval": 2.0,
    }  # fmt: skip
    src, out, group = s["input_topics"][0], s["output_topic"], s["group_id"]
    feeder = Feeder(kafka, src, values, keys)
    bridge = bridges(**s).start()
    feed_and_catch_up(kafka, feeder, group, 1_000, [bridge])
    for _ in range(2):
        kill_in_open_transaction(kafka, bridge, feeder, group, out, chunk=500)
        bridge.start()
        feed_and_catch_up(kafka, feeder, group, 1_000, [bridge])
    feed_and_catch_up(kafka, feeder, group, None, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    records = kafka.read_all(src)
    inputs = Counter(r.key.decode() for r in records if r.key)
    assert sum(inputs.values()) == len(values)
    outputs = read(out)
    sources = Counter((o["_source_partition"], o["_source_offset"]) for o in outputs)
    assert [s for s, n in sources.items() if n > 1] == [], "an input counted twice"
    assert set(sources) == {(r.partition, r.offset) for r in records}, "an input not counted"
    counts: dict[str, list[int]] = defaultdict(list)
    for o in outputs:
        counts[o["key"]].append(o["count"])
    # Every input counted once: per user the emitted counts are exactly 1..n, in order.
    assert {k: v for k, v in counts.items() if v != list(range(1, inputs[k] + 1))} == {}
    assert set(counts) == set(inputs)
    assert kafka.read_all(s["dlq_topic"]) == []
    assert kafka.end_offsets(out, True) == kafka.end_offsets(out, False), "hanging transaction"


def test_unreadable_and_unwritable_records_are_dead_lettered_with_their_class(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    s = _settings(kafka, registry, tmp_path, ORDER_OUT)
    src, out = s["input_topics"][0], s["output_topic"]
    values, keys = _orders(registry, src, 300)
    no_amount = AvroSerializer(registry.client(), json.dumps(ORDER))(
        {"id": "no-amount", "user": "u", "amount": None},
        SerializationContext(src, MessageField.VALUE),
    )
    bad = {
        b"\x01not the wire format": "NotWireFormat",
        b"\x00" + (987_654_321).to_bytes(4, "big") + b"\x02": "UnknownSchemaId",
        no_amount: "OutputNotEncodable",  # the output schema has no null amount
    }
    kafka.seed(src, [*values[:100], *bad, *values[100:]], [*keys[:100], *[b"k"] * 3, *keys[100:]])
    bridge = bridges(**s).start()
    wait_caught_up(kafka, s["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    outputs = _read(registry, kafka, out)
    assert Counter(o["id"] for o in outputs) == Counter(f"o{i}" for i in range(300))
    dead = kafka.read_all(s["dlq_topic"])
    by_value = {r.value: (r.header(H_CLASS) or b"").decode() for r in dead}
    assert by_value == bad  # the raw input bytes, each once, with its class
    sources = {(r.header(H_PARTITION), r.header(H_OFFSET)) for r in dead}
    assert len(sources) == 3


def test_an_incompatible_output_schema_stops_the_start_with_one_line(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    s = _settings(kafka, registry, tmp_path, ORDER_OUT)
    subject = f"{s['output_topic']}-value"
    # Registered first: a schema whose BACKWARD successor cannot add required fields.
    only_id = {"type": "record", "name": "OrderOut", "namespace": "demo",
               "fields": [{"name": "id", "type": "string"}]}  # fmt: skip
    registry.client().register_schema(subject, Schema(json.dumps(only_id), "AVRO"))
    bridge = bridges(**s).start()
    assert bridge.wait(120) == 2
    errors = [line for line in bridge.logs().splitlines() if " ERROR " in line]
    assert len(errors) == 1, bridge.logs()[-3000:]
    assert subject in errors[0] and "409" in errors[0]


def test_a_wrong_registry_url_stops_the_start_with_one_line(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    s = _settings(kafka, registry, tmp_path, ORDER_OUT)
    s["schema_registry"] = {"url": "http://127.0.0.1:9/apis/ccompat/v7", "timeout": 3}
    # unreachable at start is waited for up to startup_timeout, then exit 3 (as a broker outage)
    s["startup_timeout"] = 5
    bridge = bridges(**s).start()
    assert bridge.wait(120) == 3
    errors = [line for line in bridge.logs().splitlines() if " ERROR " in line]
    assert len(errors) == 1, bridge.logs()[-3000:]
    assert "http://127.0.0.1:9/apis/ccompat/v7" in errors[0]
    assert "BRIDGE_SCHEMA_REGISTRY__URL" in errors[0]


@pytest.mark.chaos
def test_a_registry_outage_dead_letters_nothing_and_processing_resumes(
    kafka: KafkaFixture,
    make_registry: Callable[[], RegistryFixture],
    bridges: MakeBridge,
    tmp_path: Path,
) -> None:
    registry = make_registry()  # its own: this test freezes it
    assert registry.server is not None and registry.server.pid is not None
    port = free_port()
    s = _settings(
        kafka, registry, tmp_path, ORDER_OUT, http_port=port, call_timeout=120,
        input_schema={"schema_file": _schema_file(tmp_path, ORDER)},  # v2 records read as v1
    )  # fmt: skip
    src, out, group = s["input_topics"][0], s["output_topic"], s["group_id"]
    bridge = bridges(**s).start()
    feed_and_catch_up(
        kafka, Feeder(kafka, src, *_orders(registry, src, 500)), group, None, [bridge]
    )
    # Records of a schema version the bridge has not seen yet: it must ask the registry.
    v2 = {**ORDER, "fields": [*ORDER["fields"], {"name": "note", "type": "string", "default": ""}]}
    write = AvroSerializer(registry.client(), json.dumps(v2))
    ctx = SerializationContext(src, MessageField.VALUE)
    later = [
        write({"id": f"v2-{i}", "user": "u", "amount": i, "note": "n"}, ctx) for i in range(300)
    ]

    os.kill(registry.server.pid, signal.SIGSTOP)  # stopped, not gone: requests time out
    try:
        kafka.seed(src, later, [b"u"] * len(later))
        wait_until(lambda: _not_ready_for_the_registry(port), 60, "/readyz 503 naming the registry")
        held = time.monotonic() + 20  # the outage's length is the test's input, not a sync
        while time.monotonic() < held:
            assert bridge.running(), bridge.logs()[-3000:]
            assert _not_ready_for_the_registry(port)
            time.sleep(0.5)
    finally:
        os.kill(registry.server.pid, signal.SIGCONT)
    wait_caught_up(kafka, group, src, 120, [bridge])
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, 60, "/readyz 200 again")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    ids = Counter(o["id"] for o in _read(registry, kafka, out))
    assert ids == Counter([*(f"o{i}" for i in range(500)), *(f"v2-{i}" for i in range(300))])
    assert kafka.read_all(s["dlq_topic"]) == []
    assert kafka.end_offsets(out, True) == kafka.end_offsets(out, False), "hanging transaction"


def _not_ready_for_the_registry(port: int) -> bool:
    status, body = http_get(port, "/readyz")
    return status == 503 and "schema registry unavailable" in body


ORDER_PROTO = """syntax = "proto3";
package demo;
message Order {
  string id = 1;
  string user = 2;
  int64 amount = 3;
}
"""
ORDER_JSON_SCHEMA = {
    "title": "Order", "type": "object", "additionalProperties": False,
    "properties": {"id": {"type": "string"}, "user": {"type": "string"},
                   "amount": {"type": "integer"}},
    "required": ["id", "user", "amount"],
}  # fmt: skip


def test_protobuf_in_json_out_and_json_schema_in_avro_out(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    proto = tmp_path / "order.proto"
    proto.write_text(ORDER_PROTO)
    order_class = compile_proto(proto)  # the input's message class (the test writes with it)
    runs = [
        ("protobuf", "json", ProtobufSerializer(order_class, registry.client(), {
            "use.deprecated.format": False}), lambda v: order_class(**v)),
        ("json_schema", "avro", JSONSerializer(json.dumps(ORDER_JSON_SCHEMA), registry.client()),
         lambda v: v),
    ]  # fmt: skip
    for input_format, output_format, write, build in runs:
        src, out, dlq = bridge_topics(kafka)
        s = base_settings(
            kafka, src, out, dlq, input_format=input_format, output_format=output_format,
            schema_registry={"url": registry.url},
            output_schema={"schema_file": _schema_file(tmp_path, ORDER_OUT)},
        )  # fmt: skip
        ctx = SerializationContext(src, MessageField.VALUE)
        orders = [{"id": f"o{i}", "user": f"u{i % 7}", "amount": i} for i in range(200)]
        kafka.seed(
            src, [write(build(o), ctx) for o in orders], [o["user"].encode() for o in orders]
        )
        bridge = bridges(**s).start()
        wait_caught_up(kafka, s["group_id"], src, 120, [bridge])
        assert bridge.terminate() == 0, bridge.logs()[-3000:]
        if output_format == "json":
            got = [json.loads(r.value) for r in kafka.read_all(out)]
        else:
            got = _read(registry, kafka, out)
        by_id = {o["id"]: o for o in got}
        assert len(got) == len(by_id) == 200, input_format
        assert all(by_id[o["id"]]["amount"] == o["amount"] for o in orders), input_format
        assert kafka.read_all(dlq) == [], input_format


def test_protobuf_in_json_out_counts_exactly_once_with_two_sigkills(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    proto = tmp_path / "order.proto"
    proto.write_text(ORDER_PROTO)
    order_class = compile_proto(proto)
    src, out, dlq = bridge_topics(kafka)
    s = base_settings(
        kafka, src, out, dlq, batch_size=500, input_format="protobuf", output_format="json",
        schema_registry={"url": registry.url, "timeout": 3},
    )  # fmt: skip
    write = ProtobufSerializer(order_class, registry.client(), {"use.deprecated.format": False})
    ctx = SerializationContext(src, MessageField.VALUE)
    orders = _order_dicts(10_000)
    values = [write(order_class(**o), ctx) for o in orders]
    keys = [o["user"].encode() for o in orders]
    _count_with_two_kills(
        kafka, bridges, tmp_path, s, values, keys,
        lambda topic: [json.loads(r.value or b"") for r in kafka.read_all(topic)],
    )  # fmt: skip


def test_json_schema_in_avro_out_counts_exactly_once_with_two_sigkills(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    s = _settings(kafka, registry, tmp_path, COUNT_OUT, input_format="json_schema")
    src = s["input_topics"][0]
    write = JSONSerializer(json.dumps(ORDER_JSON_SCHEMA), registry.client())
    ctx = SerializationContext(src, MessageField.VALUE)
    orders = _order_dicts(10_000)
    values = [write(o, ctx) for o in orders]
    keys = [o["user"].encode() for o in orders]
    _count_with_two_kills(
        kafka, bridges, tmp_path, s, values, keys, lambda out: _read(registry, kafka, out)
    )


def _order_dicts(n: int) -> list[dict[str, Any]]:
    return [{"id": f"o{i}", "user": f"user-{i % 50}", "amount": i % 97} for i in range(n)]


def test_v1_and_v2_records_mixed_are_read_with_v2_defaults_filled(
    kafka: KafkaFixture, registry: RegistryFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    v2 = {**ORDER, "fields": [*ORDER["fields"], {"name": "note", "type": "string", "default": "-"}]}
    s = _settings(
        kafka, registry, tmp_path, v2, output_format="json",  # JSON: nothing fills defaults
        input_schema={"schema_file": _schema_file(tmp_path, v2)},  # the reader schema
    )  # fmt: skip
    src, out = s["input_topics"][0], s["output_topic"]
    ctx = SerializationContext(src, MessageField.VALUE)
    write_v1 = AvroSerializer(registry.client(), json.dumps(ORDER))
    write_v2 = AvroSerializer(registry.client(), json.dumps(v2))  # a new version of <src>-value
    values = [
        write_v2({"id": f"o{i}", "user": "u", "amount": i, "note": f"n{i}"}, ctx)
        if i % 3 == 0
        else write_v1({"id": f"o{i}", "user": "u", "amount": i}, ctx)
        for i in range(600)
    ]
    assert len({parse_header(v) for v in values}) == 2  # two writer schemas, mixed
    kafka.seed(src, values, [b"u"] * len(values))
    bridge = bridges(**s).start()
    wait_caught_up(kafka, s["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    by_id = {o["id"]: o for o in (json.loads(r.value or b"") for r in kafka.read_all(out))}
    assert len(by_id) == 600
    expected = {f"o{i}": f"n{i}" if i % 3 == 0 else "-" for i in range(600)}
    assert {k: o["note"] for k, o in by_id.items()} == expected
    assert kafka.read_all(s["dlq_topic"]) == []
