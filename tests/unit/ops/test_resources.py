"""The long-run gauges: librdkafka statistics read right, stale clients dropped, RocksDB memory
read from real open stores, all exported by every registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from app.ops import resources
from app.ops.metrics import Metrics
from app.state.store import StorePartition

PRODUCER_STATS = {"name": "rdkafka#producer-1", "type": "producer", "msg_cnt": 7, "msg_size": 700}
CONSUMER_STATS = {
    "name": "rdkafka#consumer-2",
    "type": "consumer",
    "topics": {
        "in": {
            "partitions": {
                "0": {"fetchq_cnt": 3, "fetchq_size": 300},
                "1": {"fetchq_cnt": 4, "fetchq_size": 400},
                "-1": {"fetchq_cnt": 0, "fetchq_size": 0},
            }
        }
    },
}


@pytest.fixture(autouse=True)
def _empty_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "_queues", {})


def test_statistics_give_each_role_its_queue() -> None:
    resources.client_stats("producer")["stats_cb"](json.dumps(PRODUCER_STATS))
    resources.client_stats("consumer")["stats_cb"](json.dumps(CONSUMER_STATS))
    assert resources.queue_totals() == {"producer": (7, 700), "consumer": (7, 700)}


def test_clients_that_stopped_reporting_drop_out() -> None:
    resources.record_queue("producer", "old", 5, 50, now=0.0)
    resources.record_queue("producer", "new", 1, 10, now=100.0)
    assert resources.queue_totals(now=100.0) == {"producer": (1, 10)}
    assert ("producer", "old") not in resources._queues  # pruned, not kept forever


def test_unreadable_statistics_are_ignored() -> None:
    resources.client_stats("consumer")["stats_cb"]("not json")
    resources.client_stats("consumer")["stats_cb"]("[1, 2]")
    assert resources.queue_totals() == {}


def test_every_registry_exports_the_gauges(tmp_path: Path) -> None:
    store = StorePartition(tmp_path / "db", "store 'count' of in[0]")
    try:
        for i in range(1000):
            store._db[f"k{i}".encode()] = b"v" * 100
        resources.record_queue("consumer", "c", 3, 30)
        text = generate_latest(Metrics().registry).decode()
    finally:
        store.close()
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith("eos_bridge_") and " " in line
    }
    assert values["eos_bridge_python_allocated_blocks"] > 0
    assert values['eos_bridge_state_memory_bytes{kind="memtables"}'] > 100_000
    assert 'eos_bridge_state_memory_bytes{kind="block_cache"}' in values
    assert 'eos_bridge_state_memory_bytes{kind="table_readers"}' in values
    assert values['eos_bridge_client_queue_messages{client="consumer"}'] == 3
    assert values['eos_bridge_client_queue_bytes{client="consumer"}'] == 30
