"""What MirrorMaker users expect of a copy (docs/cross-cluster.md, "Topic names, partitions,
headers and timestamps"): output topics named after their input (``output_topic`` a template),
the input partition kept when the counts match, headers and timestamps kept, a bytes
passthrough, and the start-up checks that refuse a copy that cannot be made (exit 2, one line
per problem). The bridge as a subprocess against real brokers: the session broker and, across
clusters, the second one (``target_kafka``)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from app.kafka.topics import KafkaRecord
from tests.integration.conftest import MakeBridge as Make
from tests.support.bridge import REPO, base_settings, wait_caught_up
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.xcluster import alive, xcaught_up

pytestmark = pytest.mark.integration


def _seed(kafka: KafkaFixture, topic: str, partitions: int, n: int) -> None:
    """``n`` records spread over the partitions against their keys' hash (a copy that hashes
    by key moves them), each with its own timestamp and headers; some tombstones, some without
    a key or headers."""
    producer = kafka.producer(**{"enable.idempotence": True})
    t0 = int(time.time() * 1000) - 3_600_000  # an hour ago: a copy stamped "now" differs
    for i in range(n):
        headers = [] if i % 5 == 0 else [("trace", b"t%d" % i), ("trace", b"again"), ("n", b"")]
        producer.produce(
            topic,
            None if i % 11 == 0 else b"\x00%s-%d\xff" % (topic.encode(), i),
            None if i % 7 == 0 else b"k%d" % (i % 3),
            partition=i % partitions,
            timestamp=t0 + i * 1000,
            headers=headers,
        )
        producer.poll(0)
    assert producer.flush(60) == 0


def _by_partition(records: list[KafkaRecord]) -> dict[int, list[tuple[Any, ...]]]:
    """Per partition, in offset order: what a copy must keep of each record."""
    parts: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        parts[r.partition].append((r.key, r.value, tuple(r.headers), r.timestamp))
    return dict(parts)


def _all(records: list[KafkaRecord]) -> Counter[tuple[Any, ...]]:
    return Counter(r for part in _by_partition(records).values() for r in part)


def test_a_bytes_copy_between_clusters_keeps_names_partitions_order_headers_and_timestamps(
    kafka: KafkaFixture, target_kafka: KafkaFixture, bridges: Make
) -> None:
    inputs = {kafka.create_topic(kafka.unique("orders"), 4): 4,
              kafka.create_topic(kafka.unique("users"), 2): 2}  # fmt: skip
    for topic, partitions in inputs.items():
        target_kafka.create_topic(f"eu.{topic}.copy", partitions)
        _seed(kafka, topic, partitions, 600)
    dlq = target_kafka.create_topic(target_kafka.unique("dlq"), 1)
    s = base_settings(
        kafka, "", "eu.{topic}.copy", dlq, input_topics=list(inputs),
        input_format="bytes", output_format="bytes",
        target={"bootstrap_servers": target_kafka.bootstrap},
    )  # fmt: skip
    bridge = bridges(**s).start()

    def done() -> bool:
        alive([bridge])
        return xcaught_up(kafka, target_kafka, s)

    wait_until(done, 180, "the copy to commit every input")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert "records keep their input partition" in bridge.logs()
    for topic in inputs:
        copied = target_kafka.read_all(f"eu.{topic}.copy")
        assert _by_partition(copied) == _by_partition(kafka.read_all(topic)), topic
    assert target_kafka.read_all(dlq) == []


def test_one_cluster_with_a_prefix_hashes_by_key_where_the_counts_differ(
    kafka: KafkaFixture, bridges: Make
) -> None:
    four = kafka.create_topic(kafka.unique("in"), 4)
    two = kafka.create_topic(kafka.unique("in"), 2)
    for topic in (four, two):
        kafka.create_topic(f"copy.{topic}", 2)  # four's output has fewer partitions
        _seed(kafka, topic, 4 if topic == four else 2, 300)
    s = base_settings(
        kafka, "", "copy.{topic}", kafka.create_topic(kafka.unique("dlq"), 1),
        input_topics=[four, two], input_format="bytes", output_format="bytes",
    )  # fmt: skip
    bridge = bridges(**s).start()
    for topic in (four, two):
        wait_caught_up(kafka, s["group_id"], topic, 180, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert "records do not keep their input partition" in bridge.logs()
    for topic in (four, two):
        copied, source = kafka.read_all(f"copy.{topic}"), kafka.read_all(topic)
        assert _all(copied) == _all(source), topic  # every record once, headers and timestamps kept
        by_key: dict[bytes, set[int]] = defaultdict(set)
        for r in copied:
            if r.key is not None:
                by_key[r.key].add(r.partition)
        assert all(len(parts) == 1 for parts in by_key.values()), "one key, one partition"


def _run_expecting_exit_2(kafka: KafkaFixture, tmp: Any, **settings: Any) -> list[str]:
    """The bridge's output lines when it refuses to start (exit 2, no traceback)."""
    from tests.support.bridge import BridgeProcess

    bridge = BridgeProcess(tmp, **base_settings(kafka, "", "", "", **settings))
    done = subprocess.run(
        [sys.executable, "-m", "app", "run"], env=bridge.env(), cwd=REPO,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    return [line for line in out.splitlines() if line.strip()]


def test_start_up_names_each_partition_mismatch_and_each_missing_topic(
    kafka: KafkaFixture, tmp_path: Any
) -> None:
    a, b = kafka.create_topic(kafka.unique("a"), 3), kafka.create_topic(kafka.unique("b"), 2)
    kafka.create_topic(f"m.{a}", 1)
    kafka.create_topic(f"m.{b}", 4)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    lines = _run_expecting_exit_2(
        kafka, tmp_path, input_topics=[a, b], output_topic="m.{topic}", dlq_topic=dlq,
        keep_partition="true",
    )  # fmt: skip
    said = [line.split("keep_partition=true", 1)[1] for line in lines if "keep_partition=" in line]
    assert said == [
        f" (BRIDGE_KEEP_PARTITION): input topic {a!r} has 3 partitions, its output topic "
        f"'m.{a}' has 1; add partitions to the output topic or set keep_partition=auto",
        f" (BRIDGE_KEEP_PARTITION): input topic {b!r} has 2 partitions, its output topic "
        f"'m.{b}' has 4; add partitions to the output topic or set keep_partition=auto",
    ], lines
    lines = _run_expecting_exit_2(
        kafka, tmp_path, input_topics=[a, b], output_topic="none.{topic}", dlq_topic=dlq
    )
    said = [
        line.split("output_topic: ")[1].split(" does not")[0] for line in lines if "exist" in line
    ]
    assert said == [
        f"topic 'none.{a}'",
        f"topic 'none.{b}'",
    ], lines
