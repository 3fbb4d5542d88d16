"""The clock rule a record cannot cheat (issue 51, acceptance 2), bridge as a subprocess.

Before, a record whose event time *and* Kafka timestamp were both years ahead vouched for
itself: stream time jumped and every good record after it was late, with no dead letter. And
``dedupe`` had no bound at all: one record 50 minutes ahead (inside Kafka 4's default
``message.timestamp.after.max.ms``) with ``ttl: 600`` made it forget every id. Now both are
``InvalidEventTime`` dead letters against the bridge's own clock, and nothing else changes.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

YEAR_MS = 365 * 86_400_000


def _seed(kafka: KafkaFixture, topic: str, p: int, records: list[tuple[int, bytes, bytes]]) -> None:
    """``(Kafka timestamp, key, value)`` records into partition ``p``, all delivered."""
    producer = kafka.producer(**{"enable.idempotence": True})
    errors: list[str] = []
    for ts, key, value in records:
        producer.produce(
            topic,
            value,
            key,
            partition=p,
            timestamp=ts,
            on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def _dead_letters(kafka: KafkaFixture, dlq: str) -> dict[tuple[int, int], str]:
    dead = {}
    for r in kafka.read_all(dlq):
        where = (
            int(r.header("eos.dlq.source.partition") or b"-1"),
            int(r.header("eos.dlq.source.offset") or b"-1"),
        )
        assert where not in dead, f"dead-lettered twice: {where}"
        dead[where] = (r.header("eos.dlq.error.class") or b"").decode()
    return dead


def test_a_record_with_both_clocks_years_ahead_is_a_dead_letter(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    no_limit = {"message.timestamp.after.max.ms": str(2**63 - 1)}
    src = kafka.create_topic(kafka.unique("in"), 2, config=no_limit)
    out = kafka.create_topic(kafka.unique("out"), 2)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    base = int(time.time() * 1000) // 1000 * 1000 - 3_600_000  # an hour ago, a whole second
    future = base + 3 * YEAR_MS
    expected: Counter[tuple[int, str, int]] = Counter()
    expected_dead = {}
    for p in (0, 1):
        good = [(base + 10 * i, f"k{i % 5}") for i in range(400)]
        for ts, key in good:
            expected[(p, key, ts - ts % 1000)] += 1
        records = [(ts, key.encode(), orjson.dumps({"ts": ts})) for ts, key in good]
        bad_at = 0 if p == 0 else 150  # first of its partition, or in the middle
        records.insert(bad_at, (future, b"k1", orjson.dumps({"ts": future})))
        closer = base + 60_000  # closes every window of the good records
        records.append((closer, b"k0", orjson.dumps({"ts": closer})))
        expected_dead[(p, bad_at)] = "InvalidEventTime"
        _seed(kafka, src, p, records)
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  - window: {size: 1, timestamp: ts, name: both-clocks}\n")
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(spec))
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0
    logs = bridge.logs()
    assert "Traceback" not in logs and "late record" not in logs  # no good record was late

    assert _dead_letters(kafka, dlq) == expected_dead
    windows: Counter[tuple[int, str, int]] = Counter()
    for r in kafka.read_all(out):
        v = orjson.loads(r.value or b"")
        windows[(v["_source_partition"], v["key"], v["start"])] += v["value"]
    assert windows == expected  # every good record in its window, each once


def test_one_record_fifty_minutes_ahead_does_not_blind_a_dedupe(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src = kafka.create_topic(kafka.unique("in"), 2)  # Kafka 4's default: up to 1 h ahead
    out = kafka.create_topic(kafka.unique("out"), 2)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    now = int(time.time() * 1000)
    expected_dead = {}
    for p in (0, 1):
        ids = [f"{p}-{i}" for i in range(100)]
        records = [(now + i, b"k", orjson.dumps({"id": ident})) for i, ident in enumerate(ids)]
        records.append((now + 50 * 60_000, b"k", orjson.dumps({"id": f"{p}-ahead"})))
        expected_dead[(p, len(records) - 1)] = "InvalidEventTime"
        records += [
            (now + 200 + i, b"k", orjson.dumps({"id": ident})) for i, ident in enumerate(ids)
        ]
        _seed(kafka, src, p, records)
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  - dedupe: {by: id, ttl: 600, name: seen}\n")
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(spec))
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0
    assert "Traceback" not in bridge.logs()

    assert _dead_letters(kafka, dlq) == expected_dead
    passed = Counter(orjson.loads(r.value or b"")["id"] for r in kafka.read_all(out))
    assert passed == Counter(f"{p}-{i}" for p in (0, 1) for i in range(100))  # repeats dropped
