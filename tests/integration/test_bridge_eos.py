"""The bridge end to end on a real broker, run as a subprocess: exactly once, under faults."""

from __future__ import annotations

import threading
import time
from collections import Counter

import orjson
import pytest

from tests.support.bridge import (
    base_settings,
    bridge_topics,
    committed_fraction,
    json_records,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


def _topics(kafka: KafkaFixture, partitions: int = 4) -> tuple[str, str, str]:
    return bridge_topics(kafka, partitions)


def _settings(kafka: KafkaFixture, src: str, out: str, dlq: str, **extra: object) -> dict:
    return base_settings(kafka, src, out, dlq, **extra)


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


def _slow(kafka: KafkaFixture, src: str, out: str, dlq: str, **extra: object) -> dict:
    return _settings(
        kafka, src, out, dlq, pipeline="tests.pipelines:throttled", batch_size=500, **extra
    )


@pytest.mark.chaos
def test_sigkill_three_times_exactly_once(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(100_000)
    kafka.seed(src, values, keys)
    settings = _slow(kafka, src, out, dlq)
    group = settings["group_id"]
    bridge = bridges(**settings).start()
    for threshold in (0.2, 0.45, 0.7):
        wait_until(
            lambda t=threshold: committed_fraction(kafka, group, src) >= t or not bridge.running(),
            180,
            f"{threshold:.0%} progress",
            step=0.2,
        )
        assert bridge.running(), bridge.logs()[-3000:]
        bridge.kill()
        assert committed_fraction(kafka, group, src) < 1.0, "finished before the kill"
        bridge.start()
    wait_caught_up(kafka, group, src, 300, [bridge])
    assert bridge.terminate() == 0
    assert bridge.starts == 4
    assert_exactly_once(kafka, src, out)
    # The killed instances left aborted records behind: read_uncommitted sees more.
    assert len(kafka.read_all(out, read_committed=False)) > 100_000


@pytest.mark.chaos
def test_forced_aborts_exactly_once_and_negative_control(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(20_000)
    kafka.seed(src, values, keys)
    settings = _settings(kafka, src, out, dlq, fault_abort_every=3, commit_every=1000)
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0
    assert "fault injection: aborting checkpoint" in bridge.logs()
    assert_exactly_once(kafka, src, out)
    uncommitted = kafka.read_all(out, read_committed=False)
    aborted = len(uncommitted) - 20_000
    assert aborted > 0, "negative control: read_uncommitted must see the aborted records"
    ids = Counter(orjson.loads(r.value)["id"] for r in uncommitted)
    assert set(ids) == {f"r{i}" for i in range(20_000)}  # the extras are re-sent inputs


def test_sigterm_exits_zero_without_hanging_transaction(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(50_000)
    kafka.seed(src, values, keys)
    settings = _slow(kafka, src, out, dlq, commit_interval=5)
    bridge = bridges(**settings).start()
    wait_until(lambda: kafka.end_offsets(out, False) != {p: 0 for p in range(4)}, 60, "output")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    # Immediately: nothing open on any output partition.
    assert kafka.end_offsets(out, True) == kafka.end_offsets(out, False)
    committed = kafka.committed_offsets(settings["group_id"], src)
    outputs = kafka.read_all(out)
    assert len(outputs) == sum(max(0, o) for o in committed.values())


def test_restart_same_instance_fences_open_transaction(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(20_000)
    kafka.seed(src, values, keys)
    # A long checkpoint interval keeps the first instance's transaction open.
    settings = _slow(kafka, src, out, dlq, commit_interval=30, transaction_timeout_ms=120_000)
    zombie = bridges(**settings).start()
    wait_until(lambda: sum(kafka.end_offsets(out, False).values()) > 1000, 60, "open txn")
    zombie.kill()
    open_hw = sum(kafka.end_offsets(out, False).values())
    assert sum(kafka.end_offsets(out, True).values()) < open_hw  # transaction still open
    restarted = bridges(**{**settings, "commit_interval": 0.5}).start()
    t0 = time.monotonic()
    wait_until(lambda: sum(kafka.end_offsets(out, True).values()) >= open_hw, 60, "LSO advance")
    waited = time.monotonic() - t0
    # Far below transaction.timeout.ms (120 s): init_transactions aborted it at once.
    assert waited < 40, f"read_committed stalled {waited:.1f}s"
    wait_caught_up(kafka, settings["group_id"], src, 180, [restarted])
    assert restarted.terminate() == 0
    assert_exactly_once(kafka, src, out)


@pytest.mark.chaos
def test_group_grows_and_shrinks_under_load(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    settings = _slow(kafka, src, out, dlq)
    group = settings["group_id"]
    first = bridges(**settings).start()
    values, keys = json_records(60_000)
    seeder = threading.Thread(
        target=lambda: [
            kafka.seed(src, values[i : i + 5000], keys[i : i + 5000])
            for i in range(0, 60_000, 5000)
        ]
    )
    seeder.start()
    wait_until(lambda: committed_fraction(kafka, group, src) > 0.1, 120, "first instance working")
    second = bridges(**{**settings, "instance_id": "i1"}).start()
    wait_until(lambda: "assigned" in second.logs(), 60, "second instance assigned")
    wait_until(
        lambda: (
            second.logs().count("assigned") >= 1 and committed_fraction(kafka, group, src) > 0.5
        ),
        180,
        "progress with 2",
    )
    assert second.terminate() == 0, second.logs()[-3000:]
    seeder.join(120)
    wait_caught_up(kafka, group, src, 300, [first])
    assert first.terminate() == 0
    assert first.logs().count("revoked") >= 2  # 1 -> 2 and 2 -> 1
    assert_exactly_once(kafka, src, out)
