"""The bridge end to end on a real broker, run as a subprocess: exactly once, under faults."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.support.bridge import (
    BridgeProcess,
    committed_fraction,
    json_records,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def bridges(tmp_path: Path):  # type: ignore[no-untyped-def]
    started: list[BridgeProcess] = []

    def make(**settings: object) -> BridgeProcess:
        b = BridgeProcess(tmp_path, name=f"bridge-{len(started)}", **settings)
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()


def _topics(kafka: KafkaFixture, partitions: int = 4) -> tuple[str, str, str]:
    src = kafka.create_topic(kafka.unique("in"), partitions)
    out = kafka.create_topic(kafka.unique("out"), partitions)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    return src, out, dlq


def _settings(kafka: KafkaFixture, src: str, out: str, dlq: str, **extra: object) -> dict:
    return {
        "bootstrap_servers": kafka.bootstrap,
        "input_topics": [src],
        "output_topic": out,
        "dlq_topic": dlq,
        "group_id": kafka.unique("g"),
        "instance_id": "i0",
        "commit_interval": 0.5,
        **extra,
    }


def assert_exactly_once(kafka: KafkaFixture, src: str, out: str) -> None:
    """Every input exactly once in the output, order per partition kept, no open txn."""
    inputs = kafka.read_all(src)
    outputs = kafka.read_all(out)
    in_ids = Counter(orjson.loads(r.value)["id"] for r in inputs)
    out_ids = Counter(orjson.loads(r.value)["id"] for r in outputs)
    missing = set(in_ids) - set(out_ids)
    dupes = {i: c for i, c in out_ids.items() if c > in_ids.get(i, 0)}
    assert not missing, f"{len(missing)} missing, e.g. {sorted(missing)[:5]}"
    assert not dupes, f"{len(dupes)} duplicated, e.g. {list(dupes.items())[:5]}"
    assert out_ids == in_ids
    # Passthrough keeps partition and order: output partition p == input partition p by key.
    by_key_in: dict[bytes | None, list[str]] = {}
    for r in inputs:
        by_key_in.setdefault(r.key, []).append(orjson.loads(r.value)["id"])
    by_key_out: dict[bytes | None, list[str]] = {}
    for r in outputs:
        by_key_out.setdefault(r.key, []).append(orjson.loads(r.value)["id"])
    assert by_key_out == by_key_in, "per-key order changed"
    assert kafka.end_offsets(out, True) == kafka.end_offsets(out, False), "hanging transaction"


def test_100k_records_exactly_once(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(100_000)
    kafka.seed(src, values, keys)
    settings = _settings(kafka, src, out, dlq)
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert_exactly_once(kafka, src, out)
    assert kafka.committed_offsets(settings["group_id"], src) == kafka.end_offsets(src)
    assert kafka.read_all(dlq) == []
