"""Source and target as two clusters (per-role connection settings), at-least-once: the
source group keeps the offsets. Exactly-once between clusters: test_xcluster_eos.py."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from tests.support.bridge import base_settings, json_records, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration


def test_at_least_once_between_two_clusters_loses_nothing(
    kafka: KafkaFixture,
    target_kafka: KafkaFixture,
    bridges,  # type: ignore[no-untyped-def]
) -> None:
    src = kafka.create_topic(kafka.unique("in"), 2)
    out = target_kafka.create_topic(target_kafka.unique("out"), 2)
    dlq = target_kafka.create_topic(target_kafka.unique("dlq"), 1)
    values, keys = json_records(2_000)
    kafka.seed(src, values, keys)
    settings = base_settings(
        kafka, src, out, dlq, processing_guarantee="at-least-once",
        target={"bootstrap_servers": target_kafka.bootstrap},
    )  # fmt: skip
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    ids = Counter(orjson.loads(r.value)["id"] for r in target_kafka.read_all(out))
    assert set(ids) == {f"r{i}" for i in range(2_000)}
