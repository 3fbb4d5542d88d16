"""The restore loop on fake consumer messages: runs, filtering, errors, completion by position."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from app.kafka.errors import consumer_retriable
from changelog.errors import ChangelogFormatError, ChangelogReadError
from changelog.format import CF_HEADER, VERSION_HEADER, changelog_headers
from changelog.format import PROCESSED_OFFSETS_HEADER as OFFSETS
from changelog.recovery import Restorer
from changelog.restore_task import RestoreTask


class Msg:
    def __init__(
        self, topic: str, partition: int, offset: int, key: bytes | None = b"k",
        value: bytes | None = b"v", headers: Any = None, error: Any = None,
    ) -> None:  # fmt: skip
        self._v = (topic, partition, offset, key, value, headers, error)

    def topic(self) -> str:
        return self._v[0]

    def partition(self) -> int:
        return self._v[1]

    def offset(self) -> int:
        return self._v[2]

    def key(self) -> bytes | None:
        return self._v[3]

    def value(self) -> bytes | None:
        return self._v[4]

    def headers(self) -> Any:
        return self._v[5]

    def error(self) -> Any:
        return self._v[6]


class Consumer:
    """Hands out prepared batches; the position is the offset after the last one returned."""

    def __init__(self, batches: list[list[Msg]], ends: dict[tuple[str, int], int]) -> None:
        self.batches = batches
        self.ends = ends
        self.positions: dict[tuple[str, int], int] = {}
        self.closed = False

    def incremental_assign(self, tps: list[Any]) -> None:
        for tp in tps:
            self.positions[(tp.topic, tp.partition)] = tp.offset

    def incremental_unassign(self, tps: list[Any]) -> None:
        pass

    def consume(self, n: int, timeout: float) -> list[Msg]:
        batch = self.batches.pop(0) if self.batches else []
        for m in batch:
            if m.error() is None:
                self.positions[(m.topic(), m.partition())] = m.offset() + 1
        if not self.batches:  # trailing transaction markers: position moves to the end
            self.positions.update(self.ends)
        return batch

    def position(self, tps: list[Any]) -> list[Any]:
        for tp in tps:
            tp.offset = self.positions[(tp.topic, tp.partition)]
        return tps

    def close(self) -> None:
        self.closed = True


class Sink:
    def __init__(self) -> None:
        self.data: dict[tuple[bytes, bytes], bytes] = {}
        self.offsets: list[int] = []
        self.writes = 0
        self.finished = False

    def changelog_batch(self) -> Any:
        sink = self

        class Batch:
            def put(self, key: bytes, value: bytes) -> None:
                sink.data[(b"default", key)] = value

            def delete(self, key: bytes) -> None:
                sink.data.pop((b"default", key), None)

        return Batch()

    def apply_changelog(self, batch: Any, others: list[Any], last_offset: int) -> None:
        for cf, key, value in others:
            if value is None:
                self.data.pop((cf, key), None)
            else:
                self.data[(cf, key)] = value
        self.offsets.append(last_offset)
        self.writes += 1

    def finish_restore(self) -> None:
        self.finished = True


def rec(
    topic: str, offset: int, key: bytes, value: bytes | None, processed: int, cf: str = "default"
) -> Msg:
    return Msg(topic, 0, offset, key, value, changelog_headers(cf, {"in": processed}))


def make_restorer(make_consumer: Any) -> Restorer:
    return Restorer(make_consumer, retriable=consumer_retriable)


def task(topic: str, sink: Sink, end: int, committed: int = 100) -> RestoreTask:
    return RestoreTask(topic, 0, 0, end, {"in": committed}, sink)


def test_two_stores_with_the_same_partition_number_are_kept_apart() -> None:
    a, b = Sink(), Sink()
    batch = [rec("cl-a", 0, b"x", b"1", 5), rec("cl-a", 1, b"y", b"1", 5),
             rec("cl-b", 0, b"x", b"2", 5), rec("cl-a", 2, b"x", b"3", 6)]  # fmt: skip
    consumer = Consumer([batch], {("cl-a", 0): 4, ("cl-b", 0): 1})
    restorer = make_restorer(lambda: consumer)
    restorer.add(task("cl-a", a, 4))
    restorer.add(task("cl-b", b, 1))
    finished = restorer.run(deadline=float("inf"))
    assert {(t.changelog, t.partition) for t in finished} == {("cl-a", 0), ("cl-b", 0)}
    assert a.data == {(b"default", b"x"): b"3", (b"default", b"y"): b"1"}
    assert b.data == {(b"default", b"x"): b"2"}
    assert a.offsets == [1, 2] and b.offsets == [0]  # one write per run
    assert a.finished and b.finished, "a finished task makes its writes durable"
    assert consumer.closed


def test_filter_tombstones_and_other_column_families() -> None:
    sink = Sink()
    batch = [
        rec("cl", 0, b"a", b"1", 9),
        rec("cl", 1, b"b", b"1", 9),
        rec("cl", 2, b"a", None, 9),  # tombstone
        rec("cl", 3, b"t", b"1", 9, cf="__ttl_system__"),  # Quix's TTL column family
        rec("cl", 4, b"b", b"2", 10),  # processed 10 >= committed 10: skipped
    ]
    restorer = make_restorer(lambda: Consumer([batch], {("cl", 0): 6}))
    t = task("cl", sink, 6, committed=10)
    restorer.add(t)
    restorer.run(float("inf"))
    assert sink.data == {(b"default", b"b"): b"1", (b"__ttl_system__", b"t"): b"1"}
    assert (t.applied, t.skipped, t.position) == (4, 1, 6)
    assert sink.offsets == [4], "the offset advances over skipped records too"


def test_each_run_of_one_checkpoint_is_filtered_on_its_own() -> None:
    sink = Sink()
    batch = [
        rec("cl", 0, b"a", b"1", 5),
        rec("cl", 1, b"b", b"1", 5),
        rec("cl", 2, b"a", b"2", 20),
        rec("cl", 3, b"b", b"2", 20),  # never committed
        rec("cl", 4, b"c", b"1", 7),
        rec("cl", 5, b"a", None, 7),
    ]  # after an offset reset
    t = task("cl", sink, 6, committed=10)
    restorer = make_restorer(lambda: Consumer([batch], {("cl", 0): 6}))
    restorer.add(t)
    restorer.run(float("inf"))
    assert sink.data == {(b"default", b"b"): b"1", (b"default", b"c"): b"1"}
    assert (t.applied, t.skipped) == (4, 2)


def test_records_without_headers_are_not_a_changelog() -> None:
    restorer = Restorer(
        lambda: Consumer([[Msg("cl", 0, 0, headers=None)]], {("cl", 0): 1}),
        retriable=consumer_retriable,
    )
    restorer.add(task("cl", Sink(), 1))
    with pytest.raises(
        ChangelogReadError, match=r"changelog cl\[0\]@0: no __column_family__ header"
    ):
        restorer.run(float("inf"))


def test_records_of_each_format_version() -> None:
    """Format 1 with and without the version header (older bridges, Quix) restores alike;
    a newer version stops the restore naming the record; a malformed one too."""
    legacy = Msg("cl", 0, 0, b"a", b"1", [(CF_HEADER, b"default"), (OFFSETS, b'{"in":1}')])
    reordered = Msg("cl", 0, 1, b"b", b"1", [(VERSION_HEADER, b"1"), (OFFSETS, b"null"),
                                             (CF_HEADER, b"default")])  # fmt: skip
    sink = Sink()
    restorer = make_restorer(lambda: Consumer([[legacy, reordered, rec("cl", 2, b"c", b"1", 1)]],
                                              {("cl", 0): 3}))  # fmt: skip
    restorer.add(task("cl", sink, 3))
    restorer.run(float("inf"))
    assert sink.data == {(b"default", k): b"1" for k in (b"a", b"b", b"c")}
    for version, error in ((b"2", ChangelogFormatError), (b"x", ChangelogReadError)):
        newer = Msg("cl", 0, 5, b"a", b"2", [*changelog_headers("default", {"in": 1})[:2],
                                             (VERSION_HEADER, version)])  # fmt: skip
        restorer = make_restorer(lambda m=newer: Consumer([[m]], {("cl", 0): 6}))
        restorer.add(task("cl", Sink(), 6))
        expected = r"^changelog cl\[0\]@5: (state format version 2 is newer|eos)"
        with pytest.raises(error, match=expected):
            restorer.run(float("inf"))


def test_a_versioned_record_without_processed_offsets_stops_the_restore() -> None:
    """The header renamed without a migration: applied as "offsets unknown" it would pass the
    recovery filter, so the restore stops naming the record."""
    renamed = Msg("cl", 0, 4, b"a", b"1", [(CF_HEADER, b"default"), ("__processed__", b'{"in":1}'),
                                           (VERSION_HEADER, b"1")])  # fmt: skip
    restorer = make_restorer(lambda: Consumer([[renamed]], {("cl", 0): 5}))
    restorer.add(task("cl", Sink(), 5))
    expected = (
        r"^changelog cl\[0\]@4: a record of state format 1 without a __processed_tp_offsets__"
    )
    with pytest.raises(ChangelogReadError, match=expected):
        restorer.run(float("inf"))


def test_consumer_errors() -> None:
    transient = KafkaError(KafkaError._TRANSPORT)
    sink = Sink()
    batch = [rec("cl", 0, b"a", b"1", 1), Msg("cl", 0, -1001, None, None, None, transient)]
    restorer = make_restorer(lambda: Consumer([batch], {("cl", 0): 1}))
    restorer.add(task("cl", sink, 1))
    restorer.run(float("inf"))  # logged, librdkafka retries
    assert sink.offsets == [0]
    fatal = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
    restorer = Restorer(
        lambda: Consumer([[Msg("cl", 0, -1001, None, None, None, fatal)]], {}),
        retriable=consumer_retriable,
    )
    restorer.add(task("cl", Sink(), 1))
    with pytest.raises(ChangelogReadError, match="cannot read"):
        restorer.run(float("inf"))


def test_time_box_and_removal() -> None:
    consumer = Consumer([[rec("cl", 0, b"a", b"1", 1)]] * 3, {("cl", 0): 10})
    restorer = make_restorer(lambda: consumer)
    t = task("cl", Sink(), 10)
    restorer.add(t)
    assert restorer.run(deadline=0.0) == []  # deadline passed: nothing done, still active
    assert restorer.active and restorer.progress()[0].remaining == 10
    assert restorer.remove(lambda _: False) == [t]
    assert not restorer.active and consumer.closed
