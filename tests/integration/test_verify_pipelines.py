"""``verify --pipeline-spec`` on pipelines that do not keep one output per input (a filter, a
route, a count, a window): exit 0 on an exactly-once run; exit 1 with exact counts when the
test plants, outside any transaction, a duplicate, 50 unexpected records and missing ones
(the head of an output partition deleted with the admin API)."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.bridge import base_settings, wait_caught_up
from tests.support.cli import eos_bridge
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

SPECS = {
    "filter": 'steps:\n  - filter: "amount > 40"\n',
    "route": "steps:\n  - route: \"'{side}' if amount > 50 else None\"\n",
    "count": "steps:\n  - count: {name: per-user}\n",
    "window": "steps:\n  - window: {size: 10, timestamp: ts, aggregate: count, name: w10}\n",
}


def _seed(kafka: KafkaFixture, src: str) -> None:
    now = int(time.time() * 1000)
    values = [
        orjson.dumps({"id": f"r{i}", "amount": i % 97, "ts": now - (2_000 - i) * 100})
        for i in range(2_000)
    ]
    kafka.seed(src, values, [f"u{i % 13}".encode() for i in range(2_000)])


def _run(kafka: KafkaFixture, bridges, tmp_path: Path, kind: str):  # type: ignore[no-untyped-def]
    src = kafka.create_topic(kafka.unique("in"), 3)
    out = kafka.create_topic(kafka.unique("out"), 3)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    side = kafka.create_topic(kafka.unique("side"), 1)
    spec = tmp_path / f"{kind}.yaml"
    spec.write_text(SPECS[kind].replace("{side}", side))
    _seed(kafka, src)
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(spec))
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    args = ["verify", "--input", src, "--output", out, "--output", side, "--dlq", dlq,
            "--pipeline-spec", str(spec), "--group", settings["group_id"]]  # fmt: skip
    return args, out


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_verify_passes_on_an_exactly_once_run(
    kafka: KafkaFixture,
    bridges,
    tmp_path: Path,
    kind: str,  # type: ignore[no-untyped-def]
) -> None:
    args, _ = _run(kafka, bridges, tmp_path, kind)
    result = eos_bridge(*args, env={"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap})
    assert result.code == 0, result.stdout + result.stderr
    assert "0 duplicates, 0 missing" in result.stdout


def test_verify_counts_planted_violations_exactly(
    kafka: KafkaFixture,
    bridges,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    args, out = _run(kafka, bridges, tmp_path, "count")
    env = {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap}
    outputs = kafka.read_all(out)
    producer = kafka.producer()
    first = next(r for r in outputs if r.partition == 0)  # a duplicate, outside any transaction
    producer.produce(out, first.value, first.key, partition=first.partition)
    for i in range(50):  # 50 records the pipeline never made
        producer.produce(out, orjson.dumps({"key": f"x{i}", "count": 1}), b"x", partition=0)
    assert producer.flush(30) == 0
    head = [r for r in outputs if r.partition == 2][:7]  # the head of partition 2 removed
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    (future,) = admin.delete_records([TopicPartition(out, 2, head[-1].offset + 1)]).values()
    future.result(30)
    result = eos_bridge(*args, env=env)
    assert result.code == 1, result.stdout + result.stderr
    summary = result.stdout.splitlines()[0]
    assert "1 duplicates, 7 missing" in summary and "50 unexpected: VIOLATION" in summary
