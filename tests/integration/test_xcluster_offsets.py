"""Two clusters, the offsets topic on the target (app/offsets/target.py): a look-up of the
committed positions tails the topic from where the last one ended, so its cost does not grow
with the commits before it (issue 54, acceptance 7). The cost is counted in records read
(``TargetOffsets.last_read_records``), the bound is the test's own small-history run; the
times are printed (``-s``), never asserted. The store reads only the target: here the
session broker."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Producer, TopicPartition

from app.engine.watchdog import Watchdog
from app.offsets.target import TargetOffsets, offsets_key, offsets_value
from app.ops.health import Health
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration

SOURCE = "in"


def _commit(store: TargetOffsets, producer: Producer, positions: dict[int, int]) -> None:
    """One checkpoint's transaction: the positions of ``positions`` (partition: position)."""
    producer.begin_transaction()
    store.put(producer, [TopicPartition(SOURCE, p, o) for p, o in positions.items()], 10)
    producer.commit_transaction(30)


def _settled(kafka: KafkaFixture, topic: str) -> None:
    """Until the last commit's markers are written (LSO == HW): commit_transaction() returns
    before, and the look-up reads up to the read_committed end offsets."""
    wait_until(
        lambda: kafka.end_offsets(topic, True) == kafka.end_offsets(topic, False),
        30, f"the markers of the last commit to {topic}",
    )  # fmt: skip


def _look_up(store: TargetOffsets, *partitions: int) -> tuple[list[int], int, float]:
    """The positions of ``partitions``, the records the look-up read and its seconds."""
    started = time.perf_counter()
    committed = store.committed([TopicPartition(SOURCE, p) for p in partitions])
    return [tp.offset for tp in committed], store.last_read_records, time.perf_counter() - started


def _history(kafka: KafkaFixture, topic: str, group: str, n: int) -> None:
    """``n`` earlier commits of partitions 0..9, in one transaction (a fast producer)."""
    producer = kafka.transactional_producer(**{"linger.ms": 20})
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, offsets_value(1_000 + i, "w"), offsets_key(group, SOURCE, i % 10))
        if i % 10_000 == 0:
            producer.poll(0)
    producer.commit_transaction(60)


def test_an_added_partitions_look_up_costs_as_much_after_100000_commits_as_after_100(
    kafka: KafkaFixture,
) -> None:
    topic = kafka.create_topic(kafka.unique("pos"), 1, {"cleanup.policy": "compact"})
    group = kafka.unique("g")
    guard = Watchdog(Health(stale_after=30.0))  # not started: bounds recorded, never enforced
    conf = {"bootstrap.servers": kafka.bootstrap}
    store = TargetOffsets(conf, topic, group, f"{group}-w", guard, 30.0)
    producer = kafka.transactional_producer()
    try:
        for i in range(100):
            _commit(store, producer, {i % 10: i})
        _settled(kafka, topic)
        first, first_read, _ = _look_up(store, *range(10))
        assert first == list(range(90, 100)) and first_read == 100
        _commit(store, producer, {10: 7})  # an added partition
        _settled(kafka, topic)
        small, small_read, small_s = _look_up(store, 10)
        assert small == [7] and small_read == 1

        _history(kafka, topic, group, 100_000)
        _settled(kafka, topic)
        caught_up, caught_up_read, caught_up_s = _look_up(store, *range(10))
        assert caught_up == [1_000 + 99_990 + p for p in range(10)]
        assert caught_up_read == 100_000
        _commit(store, producer, {11: 9})  # another added partition, after 100,000 commits
        _settled(kafka, topic)
        big, big_read, big_s = _look_up(store, 11, 10, 0)
        assert big == [9, 7, 100_990]
        assert big_read <= small_read, f"{big_read} records read after 100,000 commits"

        restarted = TargetOffsets(conf, topic, group, f"{group}-w", guard, 30.0)
        try:  # a new instance reads the topic once from the beginning: the same positions
            again, again_read, again_s = _look_up(restarted, 11, 10, 0)
            assert again == big and again_read == 100 + 1 + 100_000 + 1
        finally:
            restarted.close()
    finally:
        store.close()
    print(
        f"\nrecords read: {first_read} (first), {small_read} (added partition after 100), "
        f"{caught_up_read} (catch-up), {big_read} (added partition after 100,000), "
        f"{again_read} (a new instance); seconds: {small_s:.4f} after 100, {big_s:.4f} after "
        f"100,000, {caught_up_s:.3f} catch-up, {again_s:.3f} new instance"
    )


def test_a_look_up_waits_for_a_transaction_open_on_the_offsets_topic(
    kafka: KafkaFixture,
) -> None:
    """The end offsets of a look-up are the high watermarks, not the LSO: a position in a
    transaction open when it starts (another task's checkpoint) is read once committed."""
    topic = kafka.create_topic(kafka.unique("pos"), 1, {"cleanup.policy": "compact"})
    group = kafka.unique("g")
    guard = Watchdog(Health(stale_after=30.0))
    store = TargetOffsets({"bootstrap.servers": kafka.bootstrap}, topic, group, "w", guard, 30.0)
    producer, other = kafka.transactional_producer(), kafka.transactional_producer()
    try:
        _commit(store, producer, {0: 5})
        _settled(kafka, topic)
        assert _look_up(store, 0, 1)[0] == [5, -1001]
        other.begin_transaction()
        store.put(other, [TopicPartition(SOURCE, 1, 42)], 10)
        other.flush(10)
        wait_until(
            lambda: kafka.end_offsets(topic, False) != kafka.end_offsets(topic, True),
            30, "the open transaction's record past the LSO",
        )  # fmt: skip
        with ThreadPoolExecutor(1) as pool:
            looked_up = pool.submit(_look_up, store, 0, 1)
            time.sleep(1.0)
            assert not looked_up.done(), "the look-up ended before the open transaction"
            other.commit_transaction(30)
            assert looked_up.result(30)[0] == [5, 42]
    finally:
        store.close()
