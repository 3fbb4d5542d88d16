"""Issue 29, acceptance 6: the stream job over the bridge's Avro output (a real broker, the real
Apicurio registry, the bridge as a subprocess) equals the plain-Python reference.

The topic holds two writer schemas (v1 written by the test, then v2 — a field added with a
default — by the bridge), a value that is not in the wire format and one whose body does not
decode. The reference decodes every record with confluent-kafka's own ``AvroDeserializer``,
independent of the job's ``from_avro``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import SparkSession

from app.kafka.topics import KafkaRecord
from devkit.kafka.cluster import free_port
from spark_jobs.avro_input import AUTH_ENV, RegistryInput
from spark_jobs.config import KafkaSource, StreamConfig, WindowSpec
from spark_jobs.stream import run_stream
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import WINDOW_MS, first_window_ms, make_events
from tests.spark.jobs import REPO
from tests.spark.reference import aggregate
from tests.spark.tables import read_table
from tests.support.bridge import BridgeProcess, base_settings, bridge_topics, wait_caught_up
from tests.support.kafka import KafkaFixture
from tests.support.registry import RegistryFixture

pytestmark = pytest.mark.spark

RSD = 0.05
EVENT_V1 = {
    "type": "record", "name": "Event", "namespace": "eosbridge.test",
    "fields": [
        {"name": "id", "type": "string"}, {"name": "key", "type": "string"},
        {"name": "amount", "type": "double"}, {"name": "ts", "type": "long"},
    ],
}  # fmt: skip
EVENT_V2 = {**EVENT_V1, "fields": [*EVENT_V1["fields"], {"name": "channel", "type": "string",
                                                          "default": "web"}]}  # fmt: skip


def _reference_records(registry: RegistryFixture, records: list[KafkaRecord]) -> tuple[
    list[KafkaRecord], set[tuple[int, int]]
]:  # fmt: skip
    """The records as JSON, decoded by confluent-kafka (v2 as reader schema), and the
    (partition, offset) of those it cannot decode."""
    read = AvroDeserializer(registry.client(), json.dumps(EVENT_V2))
    good, bad = [], set()
    for r in records:
        try:
            doc = read(r.value, SerializationContext(r.topic, MessageField.VALUE))
        except Exception:
            bad.add((r.partition, r.offset))
            continue
        assert doc["channel"] in ("web", "app")  # v1 records read with v2's default
        good.append(KafkaRecord(r.topic, r.partition, r.offset, r.key, orjson.dumps(doc), (), 0))
    return good, bad


def test_stream_job_over_the_bridges_avro_output_equals_the_reference(
    spark: SparkSession,
    kafka: KafkaFixture,
    registry: RegistryFixture,
    tmp_path: Path,
) -> None:
    src, out, dlq = bridge_topics(kafka, partitions=2)
    events = make_events(240, seed=29, t0_ms=first_window_ms())
    docs = [{"id": e.id, "key": e.key, "amount": e.amount, "ts": e.ts} for e in events]

    # An older writer (v1) wrote the first records, and two values no decoder can read.
    v1 = AvroSerializer(registry.client(), json.dumps(EVENT_V1))
    ctx = SerializationContext(out, MessageField.VALUE)
    first = [v1(d, ctx) for d in docs[:60]]
    undecodable = first[0][:5] + b"\x02"  # a known schema ID, a truncated body
    kafka.seed(out, [*first, b"{not the wire format}", undecodable], partition=0)

    # The bridge writes the rest with v2 (registered by it: a second ID in the topic).
    schema = tmp_path / "event-v2.avsc"
    schema.write_text(json.dumps(EVENT_V2))
    kafka.seed(src, [orjson.dumps({**d, "channel": "app"}) for d in docs[60:]])
    settings = base_settings(
        kafka, src, out, dlq, output_format="avro",
        schema_registry={"url": registry.url}, output_schema={"schema_file": str(schema)},
    )  # fmt: skip
    bridge = BridgeProcess(tmp_path, **settings).start()
    try:
        wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
        assert bridge.terminate() == 0, bridge.logs()[-3000:]
    finally:
        bridge.stop()
    assert kafka.read_all(dlq) == []

    good, bad = _reference_records(registry, kafka.read_all(out))
    assert len(good) == len(docs) and len(bad) == 2
    assert len({r.value[1:5] for r in kafka.read_all(out) if r.value[:1] == b"\0"}) == 2

    table = tmp_path / "table"
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, out, registry=RegistryInput(registry.url)),
        table=str(table),
        checkpoint=str(tmp_path / "checkpoint"),
        window=WindowSpec("1 minute", "30 minutes", RSD),
        max_offsets_per_trigger=200,  # two micro-batches
    )
    summary = run_stream(spark, cfg)
    assert summary.late_rows_dropped == 0 and len(summary.batch_ids) >= 2
    assert_same_aggregates(read_table(spark, table), aggregate(good, WINDOW_MS), RSD)

    rows = spark.read.format("delta").load(cfg.bad_table).collect()
    errors = {(b.partition, b.offset): b.error for b in rows}
    assert set(errors) == bad
    assert sorted(errors.values()) == [
        f"does not decode with schema ID {int.from_bytes(first[0][1:5], 'big')}",
        "not in the Confluent wire format (magic byte 0, 4-byte schema ID, body)",
    ]


def _job(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    argv = [
        sys.executable, "-m", "spark_jobs.stream", "--bootstrap", "127.0.0.1:9", "--topic",
        "out", "--table", str(tmp_path / "t"), "--checkpoint", str(tmp_path / "c"),
        "--input-format", "avro", *args,
    ]  # fmt: skip
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stderr


def _one_line(stderr: str) -> str:
    ours = [line for line in stderr.splitlines() if line.startswith("spark_jobs.stream: ")]
    assert len(ours) == 1 and "Traceback" not in stderr, stderr
    return ours[0]


def test_a_missing_registry_is_one_line_and_exit_3_before_spark_starts(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, stderr = _job(tmp_path, {AUTH_ENV: "me:s3cret"}, "--registry-url", url)
    assert code == 3, stderr
    assert f"schema registry {url} unreachable" in _one_line(stderr)
    assert "s3cret" not in stderr


def test_credentials_in_the_registry_url_are_refused_and_never_shown(tmp_path: Path) -> None:
    code, stderr = _job(tmp_path, {}, "--registry-url", "http://me:s3cret@127.0.0.1:1")
    assert code == 2, stderr
    assert AUTH_ENV in _one_line(stderr)
    assert "s3cret" not in stderr


def test_an_unknown_subject_is_one_line_and_exit_2(
    tmp_path: Path, registry: RegistryFixture
) -> None:
    code, stderr = _job(tmp_path, {}, "--registry-url", registry.url)
    assert code == 2, stderr
    assert "has no subject out-value" in _one_line(stderr)
