"""The target cluster's offset records (app.offsets.target): encoding, decoding and the rule
that the last record of a key wins, as pure functions."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from app.offsets.target import (
    decode_key,
    decode_position,
    fold_positions,
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
    def __init__(self, key: bytes | None, value: bytes | None, error: Any = None) -> None:
        self._kv, self._error = (key, value), error

    def error(self) -> Any:
        return self._error

    def key(self) -> bytes | None:
        return self._kv[0]

    def value(self) -> bytes | None:
        return self._kv[1]


class _Reader:
    """The read_committed reader of a topic whose partition 0 is the log ``records`` (any
    other partition is empty): consume() serves up to ``batch`` records from the fetch
    position that assign() sets, and queued ``errors`` first; position() is invalid until a
    record was consumed since the assign, as librdkafka's."""

    def __init__(self, records: list[tuple[bytes | None, bytes | None]], batch: int = 10_000):
        self.records, self.batch = records, batch
        self.partitions: dict[int, None] = {0: None}
        self.errors: list[_Message] = []
        self.assigns: list[list[tuple[int, int]]] = []
        self.fetch, self.app = 0, -1001

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=self.partitions)})

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return 0, len(self.records) if tp.partition == 0 else 0

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigns.append([(tp.partition, tp.offset) for tp in tps])
        self.fetch, self.app = 0, -1001  # from the beginning (every assign here is)

    def consume(self, n: int, timeout: float) -> list[_Message]:
        if self.errors:
            errors, self.errors = self.errors, []
            return errors
        batch = self.records[self.fetch : self.fetch + min(n, self.batch)]
        self.fetch += len(batch)
        if batch:
            self.app = self.fetch
        return [_Message(k, v) for k, v in batch]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.app if tp.partition == 0 else -1001)
            for tp in tps
        ]


def _store(
    reader: _Reader, guard: RecordingGuard, timeout: float, stuck_after: float | None
) -> Any:
    from app.offsets.target import TargetOffsets

    return TargetOffsets(
        {}, "g.offsets", "g", "w", guard, timeout, stuck_after=stuck_after,
        new_reader=lambda conf: reader,
    )  # fmt: skip


def test_reading_the_positions_bounds_each_client_call_by_the_stuck_call_deadline() -> None:
    reader = _Reader([(offsets_key("g", "in", 0), offsets_value(12, "w"))])
    guard = RecordingGuard()
    store = _store(reader, guard, timeout=30.0, stuck_after=12.0)
    committed = store.committed([TopicPartition("in", 0), TopicPartition("in", 1)])
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 12), (1, -1001)]
    assert guard.deadlines == [("offsets topic metadata", 12.0), ("offsets topic read", 12.0)]


def test_a_read_held_open_past_the_timeout_is_one_fatal_line() -> None:
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
    from app.errors import KafkaFatalError

    reader = _Reader([(offsets_key("g", "in", 0), offsets_value(12, "w"))])
    reader.get_watermark_offsets = lambda tp, timeout: (-1001, -1001)  # type: ignore[method-assign]
    store = _store(reader, RecordingGuard(), timeout=0.0, stuck_after=None)
    with pytest.raises(KafkaFatalError, match=r"'g.offsets': g.offsets\[0\]: no end offset"):
        store.committed([TopicPartition("in", 0)])


def _commits(n: int, start: int = 0) -> list[tuple[bytes | None, bytes | None]]:
    """``n`` commits of partitions in/0..in/9 (position = the commit's number)."""
    return [(offsets_key("g", "in", i % 10), offsets_value(i, "w")) for i in range(start, n)]


def _look_up(store: Any, *partitions: int) -> list[int]:
    return [tp.offset for tp in store.committed([TopicPartition("in", p) for p in partitions])]


def test_the_reader_errs_on_a_lost_position_and_the_ends_are_asked_of_another_client() -> None:
    from app.offsets.target import TargetOffsets

    confs: list[dict[str, Any]] = []
    TargetOffsets(
        {"bootstrap.servers": "t:9092"}, "g.offsets", "g", "w", RecordingGuard(), 5.0,
        new_reader=lambda conf: confs.append(conf) or _Reader([]),
    )  # fmt: skip
    reader, lister = confs
    assert reader["auto.offset.reset"] == "error"
    assert reader["isolation.level"] == "read_committed"
    assert lister["isolation.level"] == "read_uncommitted"  # its ends: the HW, not the LSO
    assert lister["group.id"] != reader["group.id"]


def test_a_look_up_reads_only_the_records_committed_since_the_last_one() -> None:
    reader = _Reader(_commits(100), batch=30)
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    assert _look_up(store, 0, 9, 10) == [90, 99, -1001]
    assert store.last_read_records == 100
    reader.records += [
        *_commits(103, start=100),
        (offsets_key("g", "in", 10), offsets_value(7, "w")),
    ]
    assert _look_up(store, 0, 1, 10) == [100, 101, 7]  # an added partition's position too
    assert store.last_read_records == 4
    assert _look_up(store, 10) == [7]
    assert store.last_read_records == 0  # nothing new: nothing read
    assert reader.assigns == [[(0, OFFSET_BEGINNING)]]  # assigned once, then tailed


def test_folding_the_log_in_pieces_gives_what_folding_it_whole_does() -> None:
    log = [
        *_commits(50),
        (offsets_key("g", "in", 3), None),  # a tombstone forgets in/3
        (offsets_key("other", "in", 4), offsets_value(999, "w")),
        (b"not ours", b"{}"),
        (offsets_key("g", "in", 5), offsets_value(1000, "w")),
    ]
    reader = _Reader([], batch=7)
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    for cut in (0, 13, 41, 52, len(log)):
        reader.records = log[:cut]
        store.committed([TopicPartition("in", 0)])
    assert store._positions == latest_positions("g", log)
    assert ("in", 3) not in store._positions and store._positions[("in", 5)] == 1000
    positions: dict[tuple[str, int], int] = {}
    for piece in (log[:10], log[10:51], log[51:]):
        fold_positions(positions, "g", piece)
    assert positions == latest_positions("g", log)


def test_a_lost_position_reads_again_from_the_beginning() -> None:
    from confluent_kafka import KafkaError

    reader = _Reader(_commits(20))
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    assert _look_up(store, 0) == [10]
    reader.records += _commits(25, start=20)
    reader.errors = [_Message(None, None, KafkaError(KafkaError._AUTO_OFFSET_RESET))]
    assert _look_up(store, 0, 4) == [20, 24]
    assert store.last_read_records == 25  # the whole log again, not the 5 new ones
    assert reader.assigns == [[(0, OFFSET_BEGINNING)]] * 2


def test_an_end_below_the_position_read_reads_again_and_forgets_the_old_positions() -> None:
    """The topic recreated (or truncated): its positions now are only those of its log."""
    reader = _Reader(_commits(20))
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    assert _look_up(store, 0, 7) == [10, 17]
    reader.records = _commits(3)
    assert _look_up(store, 0, 7) == [0, -1001]
    assert store.last_read_records == 3 and len(reader.assigns) == 2


def test_changed_partitions_read_again_from_the_beginning() -> None:
    reader = _Reader(_commits(20))
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    _look_up(store, 0)
    reader.partitions = {0: None, 1: None}
    assert _look_up(store, 0) == [10]
    assert reader.assigns[-1] == [(0, OFFSET_BEGINNING), (1, OFFSET_BEGINNING)]
    assert store.last_read_records == 20


def test_a_look_up_after_a_failed_one_reads_from_the_beginning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from app.errors import KafkaFatalError

    reader = _Reader(_commits(20))
    store = _store(reader, RecordingGuard(), timeout=30.0, stuck_after=None)
    _look_up(store, 0)
    reader.records += _commits(22, start=20)
    consume = reader.consume
    reader.consume = lambda n, timeout: []  # type: ignore[method-assign]  # held open
    store._timeout = 0.0
    with pytest.raises(KafkaFatalError, match="not read to its end"):
        _look_up(store, 0)
    reader.consume, store._timeout = consume, 30.0  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="app.offsets.target"):
        assert _look_up(store, 0, 1) == [20, 21]
    assert store.last_read_records == 22 and len(reader.assigns) == 2
    assert "from the beginning: the last read failed" in caplog.text
