"""A far-future event time among 2,000 good records of a windowed pipeline (issue 32,
acceptance 3): the bad record is an ``InvalidEventTime`` dead letter, every good record is
counted in its window, late records are counted (``eos_bridge_late_records_total``) and, with
``late_records: dlq``, dead-lettered as ``LateRecord``; no stall, no abort.

The bridge runs as a subprocess against the session broker.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge
from tests.support.bridge import (
    base_settings,
    bridge_topics,
    metric,
    metrics_when,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

GOOD = 2000
STEP = "per-second"
SPEC = f"""
steps:
  - window:
      size: 1
      timestamp: ts
      late_records: dlq
      name: {STEP}
"""
YEAR_9999 = 253_402_300_799_000


def _partition_input(base: int, p: int) -> tuple[list[dict[str, object]], dict[int, str]]:
    """One partition's values in order and the expected dead letters by offset.

    1,000 good records 10 ms apart (keys ``k0``..``k6``), a year-9999 record (first in
    partition 0, in the middle of partition 1), 10 records five seconds late, and a last record
    an hour ahead (within the default one-day skew) that closes every window of the good ones.
    """
    good = [{"id": f"{p}-{i}", "key": f"k{i % 7}", "ts": base + 10 * i} for i in range(GOOD // 2)]
    values: list[dict[str, object]] = list(good)
    bad_at = 0 if p == 0 else 500
    values.insert(bad_at, {"id": f"{p}-future", "key": "k1", "ts": YEAR_9999})
    late_at = 800  # stream time is then ~base + 7.9 s: windows before base + 6 s are closed
    for j in range(10):
        values.insert(late_at + j, {"id": f"{p}-late-{j}", "key": "k2", "ts": base + 1000 + j})
    values.append({"id": f"{p}-closer", "key": "k0", "ts": base + 3_600_000})
    return values, {bad_at: "InvalidEventTime"} | {late_at + j: "LateRecord" for j in range(10)}


def _reference(values: list[dict[str, object]], base: int) -> Counter[tuple[str, int]]:
    """Records per (key, window start) of the good records (ids without a suffix)."""
    counts: Counter[tuple[str, int]] = Counter()
    for v in values:
        if str(v["id"]).split("-")[-1].isdigit() and "late" not in str(v["id"]):
            ts = int(v["ts"])  # type: ignore[call-overload]
            counts[(str(v["key"]), ts - ts % 1000)] += 1
    return counts


def test_a_far_future_event_time_is_a_dead_letter_and_the_good_records_all_count(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    base = int(time.time() * 1000) // 1000 * 1000 - 3_600_000  # an hour ago, a whole second
    expected_dead: dict[tuple[int, int], str] = {}
    expected_windows: dict[tuple[int, str, int], int] = {}
    for p in (0, 1):
        values, dead = _partition_input(base, p)
        keys = [str(v["key"]).encode() for v in values]
        kafka.seed(src, [orjson.dumps(v) for v in values], keys, partition=p)
        expected_dead |= {(p, offset): cls for offset, cls in dead.items()}
        expected_windows |= {(p, *kw): n for kw, n in _reference(values, base).items()}
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    port = free_port()
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(spec), http_port=port)
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    text = metrics_when(
        port,
        lambda t: metric(t, "eos_bridge_dead_letter_records_total") >= len(expected_dead),
        "the dead letters of the last checkpoint counted",
    )
    assert bridge.terminate() == 0
    logs = bridge.logs()
    assert "Traceback" not in logs and "aborting transaction" not in logs

    assert metric(text, "eos_bridge_late_records_total", step=STEP) == 20
    assert metric(text, "eos_bridge_transaction_aborts_total") == 0
    dead: dict[tuple[int, int], str] = {}
    for r in kafka.read_all(dlq):
        source = (int(r.header("eos.dlq.source.partition") or b"-1"),
                  int(r.header("eos.dlq.source.offset") or b"-1"))  # fmt: skip
        assert source not in dead, f"dead-lettered twice: {source}"
        assert r.header("eos.dlq.error.step") == STEP.encode()
        dead[source] = (r.header("eos.dlq.error.class") or b"").decode()
        if dead[source] == "InvalidEventTime":
            message = (r.header("eos.dlq.error.message") or b"").decode()
            assert "9999-12-31" in message and "max_event_time_skew" in message
    assert dead == expected_dead
    windows: dict[tuple[int, str, int], int] = {}
    for r in kafka.read_all(out):
        v = orjson.loads(r.value or b"")
        window = (v["_source_partition"], v["key"], v["start"])
        assert window not in windows, f"window emitted twice: {window}"
        windows[window] = v["value"]
    assert windows == expected_windows
    assert sum(windows.values()) == GOOD  # every good record, each once


def _seed_with_timestamps(
    kafka: KafkaFixture, topic: str, p: int, records: list[tuple[int, bytes]]
) -> None:
    """``(Kafka timestamp, key)`` records into partition ``p``, all delivered."""
    producer = kafka.producer(**{"enable.idempotence": True})
    errors: list[str] = []
    for i, (ts, key) in enumerate(records):
        producer.produce(
            topic, orjson.dumps({"i": i}), key, partition=p, timestamp=ts,
            on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
        )  # fmt: skip
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def test_a_year_9999_kafka_timestamp_cannot_stall_a_window_on_kafka_time(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    """A topic that admits any timestamp (Kafka 4 refuses ones an hour ahead by default):
    the window's second clock is then the bridge's own."""
    no_limit = {"message.timestamp.after.max.ms": str(2**63 - 1)}
    src = kafka.create_topic(kafka.unique("in"), 2, config=no_limit)
    out = kafka.create_topic(kafka.unique("out"), 2)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    base = int(time.time() * 1000) // 1000 * 1000 - 3_600_000
    expected_dead, expected_windows = set(), Counter[tuple[int, str, int]]()
    for p in (0, 1):
        records = [(base + 10 * i, b"k%d" % (i % 7)) for i in range(GOOD // 2)]
        for ts, key in records:
            expected_windows[(p, key.decode(), ts - ts % 1000)] += 1
        bad_at = 0 if p == 0 else 300
        records.insert(bad_at, (YEAR_9999, b"k1"))
        records.append((base + 60_000, b"k0"))  # closes every window of the good records
        expected_dead.add((p, bad_at))
        _seed_with_timestamps(kafka, src, p, records)
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  - window: {size: 1, aggregate: count, name: on-kafka-time}\n")
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(spec))
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0
    assert "aborting transaction" not in bridge.logs()

    dead = {
        (int(r.header("eos.dlq.source.partition") or b"-1"),
         int(r.header("eos.dlq.source.offset") or b"-1")): r.header("eos.dlq.error.class")
        for r in kafka.read_all(dlq)
    }  # fmt: skip
    assert dead == dict.fromkeys(expected_dead, b"InvalidEventTime")
    windows: Counter[tuple[int, str, int]] = Counter()
    for r in kafka.read_all(out):
        v = orjson.loads(r.value or b"")
        windows[(v["_source_partition"], v["key"], v["start"])] += v["value"]
    assert windows == expected_windows
    assert sum(windows.values()) == GOOD
