"""The target cluster's offset records (app.offsets.target): encoding, decoding and the rule
that the last record of a key wins, as pure functions."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from confluent_kafka import TopicPartition

from app.offsets.target import (
    decode_key,
    decode_position,
    latest_positions,
    offsets_key,
    offsets_value,
)
from tests.unit.fakes import RecordingGuard


def test_a_key_names_group_topic_and_partition_and_round_trips() -> None:
    key = offsets_key("g", "in.topic", 3)
    assert isinstance(key, bytes)
    assert decode_key(key) == ("g", "in.topic", 3)
    assert offsets_key("g", "in", 1) != offsets_key("g", "in", 10)  # no ambiguous joins
    assert offsets_key("g-a", "b", 0) != offsets_key("g", "a-b", 0)


def test_a_value_holds_the_position_and_the_writer() -> None:
    value = offsets_value(42, "g-task-3")
    assert decode_position(value) == 42
    assert b"g-task-3" in value


def test_foreign_or_broken_records_are_ignored() -> None:
    assert decode_key(b"not json") is None
    assert decode_key(b'["g", "t"]') is None
    assert decode_key(b'["g", "t", "0"]') is None
    assert decode_position(None) is None
    assert decode_position(b"[]") is None
    assert decode_position(b'{"position": -1}') is None


def test_the_last_record_of_a_partition_wins_and_other_groups_are_skipped() -> None:
    records = [
        (offsets_key("g", "in", 0), offsets_value(10, "w")),
        (offsets_key("g", "in", 1), offsets_value(5, "w")),
        (offsets_key("other", "in", 0), offsets_value(99, "w")),
        (offsets_key("g", "in", 0), offsets_value(20, "w")),
        (offsets_key("g", "in", 1), None),  # tombstone: forgotten, the reset policy applies
        (None, b"{}"),
    ]
    assert latest_positions("g", records) == {("in", 0): 20}


def test_put_writes_one_record_per_partition_through_each_task() -> None:
    from app.offsets.target import TargetOffsets

    class Routing:
        def __init__(self) -> None:
            self.current = -1
            self.produced: list[tuple[int, str, bytes, bytes]] = []

        def select(self, task: int) -> str:
            self.current = task
            return f"g-task-{task}"

        def produce(self, topic: str, value: bytes, key: bytes) -> None:
            self.produced.append((self.current, topic, key, value))

    store = TargetOffsets.__new__(TargetOffsets)  # no reader: put() only writes
    store.topic, store._group, store._writer = "g.offsets", "g", "g-instance"
    producer = Routing()
    store.put(producer, [TopicPartition("a", 0, 7), TopicPartition("b", 1, 3)], 1.0)  # type: ignore[arg-type]
    assert [(task, topic, decode_key(key)) for task, topic, key, _ in producer.produced] == [
        (0, "g.offsets", ("g", "a", 0)),
        (1, "g.offsets", ("g", "b", 1)),
    ]
    assert [decode_position(v) for *_, v in producer.produced] == [7, 3]
    assert b"g-task-1" in producer.produced[1][3]


def test_mirroring_commits_the_same_positions_to_the_source_group_asynchronously() -> None:
    from app.offsets.target import TargetOffsets

    class Group:
        def __init__(self) -> None:
            self.commits: list[tuple[list[tuple[str, int, int]], bool]] = []

        def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> None:
            self.commits.append(([(t.topic, t.partition, t.offset) for t in offsets], asynchronous))

    store = TargetOffsets.__new__(TargetOffsets)
    store._mirror = None
    store.after_commit([TopicPartition("in", 0, 5)])  # off by default: nothing
    group = Group()
    store._mirror = group
    store.after_commit([TopicPartition("in", 0, 5)])
    assert group.commits == [([("in", 0, 5)], True)]


class _Message:
    def __init__(self, key: bytes, value: bytes) -> None:
        self._kv = (key, value)

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return self._kv[0]

    def value(self) -> bytes:
        return self._kv[1]


class _Reader:
    """The read_committed reader: one partition holding ``records``, served in one batch."""

    def __init__(self, records: list[tuple[bytes, bytes]]) -> None:
        self.records = records
        self.read = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None})})

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, len(self.records)

    def assign(self, tps: list[TopicPartition]) -> None: ...
    def unassign(self) -> None: ...

    def consume(self, n: int, timeout: float) -> list[_Message]:
        batch, self.read = self.records[self.read :], len(self.records)
        return [_Message(k, v) for k, v in batch]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.read) for tp in tps]


def _store(
    reader: _Reader, guard: RecordingGuard, timeout: float, stuck_after: float | None
) -> Any:
    from app.offsets.target import _GRACE_S, TargetOffsets

    store = TargetOffsets.__new__(TargetOffsets)  # the reader is a fake: no cluster
    store._reader, store.topic, store._group, store._guard = reader, "g.offsets", "g", guard
    store._timeout, store._stuck_after = timeout, stuck_after or timeout + _GRACE_S
    return store


def test_reading_the_positions_bounds_each_client_call_by_the_stuck_call_deadline() -> None:
    reader = _Reader([(offsets_key("g", "in", 0), offsets_value(12, "w"))])
    guard = RecordingGuard()
    store = _store(reader, guard, timeout=30.0, stuck_after=12.0)
    committed = store.committed([TopicPartition("in", 0), TopicPartition("in", 1)])
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 12), (1, -1001)]
    assert guard.deadlines == [("offsets topic metadata", 12.0), ("offsets topic read", 12.0)]


def test_a_read_held_open_past_the_timeout_is_one_fatal_line() -> None:
    import pytest

    from app.errors import KafkaFatalError

    reader = _Reader([(offsets_key("g", "in", 0), offsets_value(1, "w"))])
    reader.consume = lambda n, timeout: []  # type: ignore[method-assign]  # an open transaction
    store = _store(reader, RecordingGuard(), timeout=0.0, stuck_after=None)
    with pytest.raises(KafkaFatalError, match=r"not read to its end .* a transaction holds it"):
        store.committed([TopicPartition("in", 0)])


def test_an_end_offset_answered_as_invalid_is_asked_again() -> None:
    """-1001 taken for the end would end the read before its records: positions from nothing."""
    reader = _Reader([(offsets_key("g", "in", 0), offsets_value(12, "w"))])
    answers = iter([(-1001, -1001), (0, 1)])
    reader.get_watermark_offsets = lambda tp, timeout: next(answers)  # type: ignore[method-assign]
    consume, fetches = reader.consume, iter([False, True])  # the first fetch brings nothing yet
    reader.consume = lambda n, timeout: consume(n, timeout) if next(fetches) else []  # type: ignore[method-assign]
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    committed = store.committed([TopicPartition("in", 0)])
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 12)]


def test_an_end_offset_never_answered_is_one_fatal_line() -> None:
    import pytest

    from app.errors import KafkaFatalError

    reader = _Reader([(offsets_key("g", "in", 0), offsets_value(12, "w"))])
    reader.get_watermark_offsets = lambda tp, timeout: (-1001, -1001)  # type: ignore[method-assign]
    store = _store(reader, RecordingGuard(), timeout=0.0, stuck_after=None)
    with pytest.raises(KafkaFatalError, match=r"'g.offsets': g.offsets\[0\]: no end offset"):
        store.committed([TopicPartition("in", 0)])
