"""The bridge end to end on a real broker, run as a subprocess: exactly once, under faults."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from tests.support.bridge import (
    base_settings,
    bridge_topics,
    json_records,
    wait_caught_up,
)
from tests.support.feed import Feeder, feed_and_catch_up, kill_in_open_transaction, open_records
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


def _tagging(kafka: KafkaFixture, src: str, out: str, dlq: str, **extra: object) -> dict:
    return _settings(
        kafka, src, out, dlq, pipeline="tests.pipelines:tagged", batch_size=500, **extra
    )


@pytest.mark.chaos
def test_sigkill_three_times_exactly_once(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    feeder = Feeder(kafka, src, *json_records(100_000))
    settings = _tagging(kafka, src, out, dlq)
    group = settings["group_id"]
    bridge = bridges(**settings).start()
    for _ in range(3):
        feed_and_catch_up(kafka, feeder, group, 20_000, [bridge])
        kill_in_open_transaction(kafka, bridge, feeder, group, out, chunk=2_000)
        bridge.start()
    feed_and_catch_up(kafka, feeder, group, None, [bridge])
    assert bridge.terminate() == 0
    assert bridge.starts >= 4
    assert_exactly_once(kafka, src, out)
    # Each kill left an open transaction behind, aborted by the restart: read_uncommitted
    # sees those records on top of the committed ones.
    assert len(kafka.read_all(out, read_committed=False)) > 100_000


@pytest.mark.chaos
def test_forced_aborts_exactly_once_and_negative_control(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(20_000)
    kafka.seed(src, values, keys)
    settings = _settings(kafka, src, out, dlq, faults={"abort_every": 3}, commit_every=1000)
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
    settings = _tagging(kafka, src, out, dlq, commit_interval=5)
    bridge = bridges(**settings).start()
    # SIGTERM while a transaction is seen holding output records (any output at all could
    # already be committed on a slow machine, and the test would then prove nothing).
    held = [0]

    def open_transaction() -> bool:
        held[0] = open_records(kafka, out)
        return held[0] > 0 or not bridge.running()

    wait_until(open_transaction, 120, "an open transaction on the output")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    # Immediately: nothing open on any output partition.
    assert kafka.end_offsets(out, True) == kafka.end_offsets(out, False)
    committed = kafka.committed_offsets(settings["group_id"], src)
    outputs = kafka.read_all(out)
    assert len(outputs) == sum(max(0, o) for o in committed.values())
    assert len(outputs) >= held[0], "the final checkpoint did not commit the open transaction"


def test_restart_same_instance_fences_open_transaction(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    src, out, dlq = _topics(kafka)
    values, keys = json_records(20_000)
    kafka.seed(src, values, keys)
    # A checkpoint interval longer than the test keeps the first transaction open, and a
    # transaction timeout far beyond the test's wait: the open transaction can only end
    # because the restarted instance's init_transactions fences and aborts it.
    settings = _tagging(kafka, src, out, dlq, commit_interval=200, transaction_timeout_ms=900_000)
    zombie = bridges(**settings).start()
    wait_until(lambda: open_records(kafka, out) > 1000 or not zombie.running(), 180, "open txn")
    zombie.kill()
    open_hw = sum(kafka.end_offsets(out, False).values())
    assert sum(kafka.end_offsets(out, True).values()) < open_hw  # transaction still open
    restarted = bridges(**{**settings, "commit_interval": 0.5}).start()
    wait_until(lambda: sum(kafka.end_offsets(out, True).values()) >= open_hw, 180, "LSO advance")
    wait_caught_up(kafka, settings["group_id"], src, 180, [restarted])
    assert restarted.terminate() == 0
    assert_exactly_once(kafka, src, out)


@pytest.mark.chaos
def test_group_grows_and_shrinks_under_load(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    """1 -> 2 -> 1 instances; each change happens between phases of input the test feeds."""
    logs = grow_and_shrink(kafka, bridges, 20_000)
    assert logs.count("revoked") >= 2  # 1 -> 2 and 2 -> 1


def grow_and_shrink(kafka: KafkaFixture, bridges, phase: int, **extra: object) -> str:  # type: ignore[no-untyped-def]
    """1 -> 2 -> 1 instances of the tagging pipeline, fed ``phase`` records before the second
    joins and half of it while the group settles; exactly once. Returns the first one's log."""
    src, out, dlq = _topics(kafka)
    feeder = Feeder(kafka, src, *json_records(3 * phase))
    settings = _tagging(kafka, src, out, dlq, **extra)
    group = settings["group_id"]
    first = bridges(**settings).start()
    feed_and_catch_up(kafka, feeder, group, phase, [first])
    second = bridges(**{**settings, "instance_id": "i1"}).start()
    wait_until(lambda: "assigned" in second.logs() or not second.running(), 120, "second assigned")
    feeder.feed(phase // 2)  # under load: input arrives while the group settles
    feed_and_catch_up(kafka, feeder, group, phase // 2, [first, second])
    assert second.terminate() == 0, second.logs()[-3000:]
    feed_and_catch_up(kafka, feeder, group, None, [first])
    assert first.terminate() == 0, first.logs()[-3000:]
    assert_exactly_once(kafka, src, out)
    return first.logs()
