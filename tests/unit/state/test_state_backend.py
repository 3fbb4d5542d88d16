"""The RocksDB backend's checkpoint cycle, without Kafka (fake producer, no restore needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.config import BridgeSettings
from app.engine.wiring import state_root
from app.errors import CheckpointAborted, ConfigError, PartitionsMigrated, RecoveryError
from app.kafka.errors import consumer_retriable
from app.sink.collector import RecordCollector
from app.state import manager
from app.state.cache import WRITE_BEHIND_S
from app.state.factory import reset_state
from app.state.locking import StateDirLock
from app.state.manager import RocksDBState
from app.state.store import StorePartition, set_block_cache
from app.state.store import _memory as store_memory
from changelog.errors import ChangelogReadError
from changelog.format import CF_HEADER, PROCESSED_OFFSETS_HEADER, VERSION_HEADER
from changelog.recovery import Restorer
from tests.unit.fakes import FakeMessage, produce_keywords

CHANGELOG = "changelog__g--in--count"


class FakeProducer:
    """Records produce() calls; flush() delivers them with consecutive offsets."""

    def __init__(self, fail: bool = False) -> None:
        self.records: list[dict[str, Any]] = []
        self._queue: list[tuple[Any, FakeMessage]] = []
        self._next = 0
        self._fail = fail

    def produce(self, topic: str, value: Any, key: Any, *args: Any, **kw: Any) -> None:
        kw = {**produce_keywords(args), **kw}
        self.records.append({"topic": topic, "value": value, "key": key, **kw})
        self._queue.append((kw.get("on_delivery"), FakeMessage(topic, kw["partition"], self._next)))
        self._next += 1

    def flush(self, _timeout: float = 0.0) -> int:
        for callback, msg in self._queue:
            if callback is not None:  # the writer asks for the last record's report only
                callback("broker says no" if self._fail else None, msg)
        self._queue.clear()
        return 0


def restorer(make_consumer: Any) -> Restorer:
    return Restorer(make_consumer, retriable=consumer_retriable)


def no_consumer() -> Any:
    raise AssertionError("nothing to restore: the restore consumer must not be created")


def backend(root: Path, cap: int = 1 << 30, high: int = 0) -> RocksDBState:
    return RocksDBState(
        root,
        {("count", "in"): CHANGELOG},
        cap,
        restorer(no_consumer),
        lambda tps: {tp: (0, high) for tp in tps},
    )


def ready(state: RocksDBState, *partitions: int) -> None:
    tps = [("in", p) for p in partitions]
    state.assign(tps)
    assert state.pending_recovery() == tps
    assert state.recover({tp: -1001 for tp in tps}, 1.0)
    assert state.pending_recovery() == []


def test_checkpoint_cycle(tmp_path: Path) -> None:
    state = backend(tmp_path)
    ready(state, 0, 1)
    state.partition("count", "in", 0).set(b"k", b"1")
    state.partition("count", "in", 1).set(b"j", b"2")
    state.partition("count", "in", 1).delete(b"gone")
    producer = FakeProducer()
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 10, ("in", 1): 20})
    producer.flush()
    state.verify_delivery()
    state.after_commit()
    by_key = {r["key"]: r for r in producer.records}
    assert by_key[b"k"]["topic"] == CHANGELOG and by_key[b"k"]["partition"] == 0
    assert dict(by_key[b"k"]["headers"]) == {
        CF_HEADER: b"default",
        PROCESSED_OFFSETS_HEADER: b'{"in":9}',  # position 10 → last processed offset 9
        VERSION_HEADER: b"1",
    }
    assert by_key[b"gone"]["value"] is None  # tombstone
    assert dict(by_key[b"j"]["headers"])[PROCESSED_OFFSETS_HEADER] == b'{"in":19}'
    state.close()
    store = StorePartition(tmp_path / "count" / "in" / "1", "t")
    assert store.get(b"j") == b"2"
    assert store.changelog_offset() == max(
        i for i, r in enumerate(producer.records) if r["partition"] == 1
    )
    store.close()


def test_discard_forgets_uncommitted_updates(tmp_path: Path) -> None:
    state = backend(tmp_path)
    ready(state, 0)
    view = state.partition("count", "in", 0)
    view.set(b"k", b"1")
    view.memo["t"] = 5
    state.discard()
    assert view.get(b"k") is None and view.memo == {}
    producer = FakeProducer()
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 1})
    assert producer.records == []
    state.close()


def test_cache_cap_forces_a_checkpoint(tmp_path: Path) -> None:
    state = backend(tmp_path, cap=10_000)
    ready(state, 0)
    view = state.partition("count", "in", 0)
    for i in range(20):
        view.set(b"k%d" % i, b"x" * 100)
    assert not state.needs_checkpoint()
    for i in range(20, 60):
        view.set(b"k%d" % i, b"x" * 100)
    assert state.needs_checkpoint()
    producer = FakeProducer()
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 60})
    producer.flush()
    state.after_commit()
    assert not state.needs_checkpoint()
    state.close()


def test_failed_changelog_delivery_fails_the_checkpoint(tmp_path: Path) -> None:
    state = backend(tmp_path)
    ready(state, 0)
    state.partition("count", "in", 0).set(b"k", b"1")
    collector = RecordCollector(FakeProducer(fail=True))
    state.produce_changelogs(collector, {("in", 0): 1})
    with pytest.raises(CheckpointAborted, match=rf"delivery error.*changelog {CHANGELOG}\[0\]"):
        collector.flush(1.0)
    state.close()


def test_late_reports_of_an_aborted_checkpoint_are_ignored(tmp_path: Path) -> None:
    state = backend(tmp_path)
    ready(state, 0)
    state.partition("count", "in", 0).set(b"k", b"1")
    aborted = FakeProducer(fail=True)
    collector = RecordCollector(aborted)
    state.produce_changelogs(collector, {("in", 0): 1})
    state.discard()
    collector.reset()  # the abort
    state.partition("count", "in", 0).set(b"k", b"1")
    producer = FakeProducer()
    collector.rebind(producer)
    state.produce_changelogs(collector, {("in", 0): 1})
    aborted.flush()  # purged records of the aborted transaction report late
    collector.flush(1.0)
    state.verify_delivery()
    state.close()


def test_unconfirmed_changelog_records_fail_the_checkpoint(tmp_path: Path) -> None:
    state = backend(tmp_path)
    ready(state, 0)
    state.partition("count", "in", 0).set(b"k", b"1")
    state.produce_changelogs(RecordCollector(FakeProducer()), {("in", 0): 1})
    with pytest.raises(CheckpointAborted, match="1 changelog record"):
        state.verify_delivery()
    state.close()


def test_state_of_an_unassigned_partition_is_refused(tmp_path: Path) -> None:
    state = backend(tmp_path)
    state.assign([("in", 3)])
    with pytest.raises(PartitionsMigrated, match=r"in\[3\]"):
        state.partition("count", "in", 3)  # not recovered yet
    with pytest.raises(RecoveryError, match="committed offset"):
        state.recover({}, 1.0)
    state.close()


def test_revoked_partition_is_closed(tmp_path: Path) -> None:
    state = backend(tmp_path)
    ready(state, 0)
    state.revoke([("in", 0)])
    with pytest.raises(PartitionsMigrated):
        state.partition("count", "in", 0)
    ready(state, 0)  # and can come back
    state.close()


class MarkersOnlyConsumer:
    """A changelog partition holding only transaction markers: nothing is ever returned,
    the position still reaches the end."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.assigned: list[Any] = []
        self.closed = False

    def incremental_assign(self, tps: list[Any]) -> None:
        self.assigned += tps

    def incremental_unassign(self, tps: list[Any]) -> None:
        pass

    def consume(self, n: int, timeout: float) -> list[Any]:
        return []

    def position(self, tps: list[Any]) -> list[Any]:
        for tp in tps:
            tp.offset = self.end
        return tps

    def close(self) -> None:
        self.closed = True


def test_store_ahead_of_its_changelog_is_wiped(tmp_path: Path) -> None:
    store = StorePartition(tmp_path / "count" / "in" / "0", "t")
    store.write({b"stale": b"1"}, changelog_offset=41)
    store.close()
    consumer = MarkersOnlyConsumer(end=10)
    state = RocksDBState(
        tmp_path, {("count", "in"): CHANGELOG}, 1 << 20, restorer(lambda: consumer),
        lambda tps: {tp: (0, 10) for tp in tps},  # the changelog ends at 10: re-created
    )  # fmt: skip
    state.assign([("in", 0)])
    assert state.recover({("in", 0): -1001}, 5.0)
    assert [(tp.topic, tp.partition, tp.offset) for tp in consumer.assigned] == [(CHANGELOG, 0, 0)]
    assert consumer.closed, "the restore consumer is closed once nothing is left to restore"
    assert state.partition("count", "in", 0).get(b"stale") is None
    state.close()


def _settings(tmp_path: Path) -> BridgeSettings:
    return BridgeSettings(
        input_topics=["in"], output_topic="out", group_id="g", state_dir=tmp_path / "state"
    )


def test_reset_state_wipes_local_state_but_not_a_live_one(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    root = state_root(settings)
    lock = StateDirLock(root)
    state = RocksDBState(
        root, {("count", "in"): CHANGELOG}, 1 << 20, restorer(no_consumer),
        lambda tps: {tp: (0, 0) for tp in tps}, lock,
    )  # fmt: skip
    ready(state, 0)
    state.partition("count", "in", 0).set(b"k", b"1")
    producer = FakeProducer()
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 1})
    producer.flush()
    state.after_commit()
    with pytest.raises(ConfigError, match=r"in use by pid \d+"):
        reset_state(root)
    state.close()
    reset_state(root)
    assert [p.name for p in root.iterdir()] == [".lock"]
    reset_state(root)  # idempotent


def test_corrupt_store_is_wiped_and_reopened_empty(tmp_path: Path) -> None:
    store = StorePartition(tmp_path / "db", "t")
    store.write({b"k": b"1"}, changelog_offset=3)
    store.close()
    (tmp_path / "db" / "CURRENT").write_text("MANIFEST-999999\n")  # points nowhere
    store = StorePartition(tmp_path / "db", "t")
    assert store.get(b"k") is None and store.changelog_offset() is None
    store.close()


def test_store_held_by_someone_else_is_not_wiped(tmp_path: Path) -> None:
    from app.errors import StateCorrupted

    holder = StorePartition(tmp_path / "db", "t")
    holder.write({b"k": b"1"}, changelog_offset=3)
    with pytest.raises(StateCorrupted, match="lock"):
        StorePartition(tmp_path / "db", "t")
    assert holder.get(b"k") == b"1"
    holder.close()


def test_committed_values_are_read_from_memory_until_the_read_cap(tmp_path: Path) -> None:
    state = backend(tmp_path, cap=20_000)
    ready(state, 0)
    view = state.partition("count", "in", 0)
    store_reads: list[bytes] = []
    real_get = view.store.get
    view.store.get = lambda key: store_reads.append(key) or real_get(key)  # type: ignore[method-assign]

    def checkpoint(position: int) -> None:
        producer = FakeProducer()
        state.produce_changelogs(RecordCollector(producer), {("in", 0): position})
        producer.flush()
        state.verify_delivery()
        state.after_commit()

    view.set(b"a", b"1")
    view.delete(b"b")
    checkpoint(2)
    assert (view.get(b"a"), view.get(b"b")) == (b"1", None)
    assert store_reads == []  # both answered by the read cache
    view.set(b"a", b"2")
    state.discard()  # an abort drops the update, not the committed value
    assert view.get(b"a") == b"1" and store_reads == []
    # Past the read cap the cache starts afresh; answers come from RocksDB, unchanged.
    for i in range(100):
        view.set(b"k%d" % i, b"x" * 100)
    checkpoint(3)
    for i in range(100):
        view.set(b"m%d" % i, b"y" * 100)
    checkpoint(4)
    assert view.get(b"a") == b"1" and store_reads == [b"a"]
    assert view.get(b"k7") == b"x" * 100 and view.get(b"m7") == b"y" * 100
    state.close()
    assert state._reads.used == 0  # closing returns the read budget


def test_only_the_last_changelog_record_of_a_partition_asks_for_a_report(tmp_path: Path) -> None:
    class FullOnce(FakeProducer):
        """Refuses the second produce call once with a full local queue."""

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0
            self.polls = 0

        def produce(self, topic: str, value: Any, key: Any, *args: Any, **kw: Any) -> None:
            self.calls += 1
            if self.calls == 2:
                raise BufferError("Local: Queue full")
            super().produce(topic, value, key, *args, **kw)

        def poll(self, _timeout: float) -> int:
            self.polls += 1
            return 0

    state = backend(tmp_path)
    ready(state, 0, 1)
    for i in range(3):
        state.partition("count", "in", 0).set(b"k%d" % i, b"1")
    state.partition("count", "in", 1).set(b"j", b"1")
    producer = FullOnce()
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 3, ("in", 1): 1})
    reported = [(r["partition"], r["key"]) for r in producer.records if "on_delivery" in r]
    assert reported == [(0, b"k2"), (1, b"j")]
    assert len(producer.records) == 4 and producer.polls == 1  # the refused one went again
    producer.flush()
    state.verify_delivery()
    state.after_commit()
    state.close()
    store = StorePartition(tmp_path / "count" / "in" / "0", "t")
    assert store.changelog_offset() == 2  # the last record's offset
    store.close()


def test_a_changelog_that_cannot_be_read_is_a_recovery_error(tmp_path: Path) -> None:
    def unreadable(_tps: Any) -> Any:
        raise ChangelogReadError(f"cannot list offsets of changelog {CHANGELOG}[0]: denied")

    state = RocksDBState(
        tmp_path, {("count", "in"): CHANGELOG}, 1 << 20, restorer(no_consumer), unreadable
    )
    state.assign([("in", 0)])
    with pytest.raises(RecoveryError, match=rf"{CHANGELOG}\[0\]: denied"):
        state.recover({("in", 0): -1001}, 1.0)
    state.close()


# ---- write-behind to RocksDB (app.state.cache.WRITE_BEHIND_S) ------------------------------


class Clock:
    """The manager's ``time`` module, with a clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def checkpoint(state: RocksDBState, producer: FakeProducer, position: int) -> None:
    state.produce_changelogs(RecordCollector(producer), {("in", 0): position})
    producer.flush()
    state.verify_delivery()
    state.after_commit()


def spy_writes(view: Any) -> list[tuple[dict[bytes, bytes | None], int]]:
    writes: list[tuple[dict[bytes, bytes | None], int]] = []
    real = view.store.write

    def write(updates: dict[bytes, bytes | None], changelog_offset: int) -> None:
        writes.append((dict(updates), changelog_offset))
        real(updates, changelog_offset)

    view.store.write = write
    return writes


def reopened(root: Path) -> tuple[dict[bytes, bytes | None], int | None]:
    store = StorePartition(root / "count" / "in" / "0", "t")
    try:
        keys = (b"j", b"k", b"m")
        return {k: store.get(k) for k in keys}, store.changelog_offset()
    finally:
        store.close()


def test_checkpoints_reach_rocksdb_in_one_write_after_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(manager, "time", clock)
    state, producer = backend(tmp_path), FakeProducer()
    ready(state, 0)
    view = state.partition("count", "in", 0)
    writes = spy_writes(view)
    view.set(b"k", b"1")
    view.set(b"j", b"1")
    checkpoint(state, producer, 1)  # changelog offsets 0, 1
    clock.now += 1
    view.set(b"k", b"2")
    view.delete(b"j")
    checkpoint(state, producer, 2)  # 2, 3
    assert writes == []  # committed, served from memory
    assert (view.get(b"k"), view.get(b"j")) == (b"2", None)
    assert view.scan(b"", b"\xff") == [(b"k", b"2")]
    clock.now += WRITE_BEHIND_S
    view.set(b"m", b"1")
    checkpoint(state, producer, 3)  # 4
    assert writes == [({b"k": b"2", b"j": None, b"m": b"1"}, 4)]  # newest values, newest offset
    clock.now += WRITE_BEHIND_S
    checkpoint(state, producer, 3)  # nothing new: nothing written
    assert len(writes) == 1
    state.close()
    assert reopened(tmp_path) == ({b"j": None, b"k": b"2", b"m": b"1"}, 4)


def test_updates_after_the_changelogs_belong_to_the_next_checkpoint(tmp_path: Path) -> None:
    """The pipelined checkpoint transforms the next batch between step 1 and step 5: its
    updates are read over the checkpoint's, but neither in its changelog records nor in what
    its step 5 commits."""
    state, producer = backend(tmp_path), FakeProducer()
    ready(state, 0)
    view = state.partition("count", "in", 0)
    view.set(b"k", b"1")
    view.set(b"j", b"1")
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 2})  # offsets 0, 1
    view.set(b"k", b"2")  # the next batch, while the commit is in flight
    view.set(b"m", b"1")
    assert (view.get(b"k"), view.get(b"j"), view.get(b"m")) == (b"2", b"1", b"1")
    assert view.scan(b"", b"\xff") == [(b"j", b"1"), (b"k", b"2"), (b"m", b"1")]
    producer.flush()
    state.verify_delivery()
    state.after_commit()
    assert [(r["key"], r["value"]) for r in producer.records] == [(b"k", b"1"), (b"j", b"1")]
    assert view.dirty == {b"k": b"2", b"m": b"1"} and view.committing == {}
    state.discard()  # the next transaction aborts: back to what the first one committed
    assert (view.get(b"k"), view.get(b"j"), view.get(b"m")) == (b"1", b"1", None)
    state.close()
    assert reopened(tmp_path) == ({b"j": b"1", b"k": b"1", b"m": None}, 1)


def test_a_failed_checkpoint_drops_the_updates_made_beside_it(tmp_path: Path) -> None:
    state, producer = backend(tmp_path, cap=10_000), FakeProducer()
    ready(state, 0)
    view = state.partition("count", "in", 0)
    view.set(b"k", b"1")
    checkpoint(state, producer, 1)  # committed: k=1
    view.set(b"k", b"2")
    state.produce_changelogs(RecordCollector(producer), {("in", 0): 2})
    view.set(b"k", b"3")  # beside a commit that then fails: both layers go
    state.discard()
    assert view.get(b"k") == b"1" and state._budget.used == 0
    state.close()
    assert reopened(tmp_path)[0][b"k"] == b"1"


def test_an_abort_keeps_unwritten_committed_updates_and_close_writes_them(tmp_path: Path) -> None:
    state, producer = backend(tmp_path), FakeProducer()
    ready(state, 0)
    view = state.partition("count", "in", 0)
    view.set(b"k", b"1")
    checkpoint(state, producer, 1)  # offset 0
    view.set(b"k", b"2")
    state.discard()
    assert view.get(b"k") == b"1"
    state.revoke([("in", 0)])
    assert reopened(tmp_path) == ({b"j": None, b"k": b"1", b"m": None}, 0)
    state.close()


def test_a_crash_before_the_write_leaves_the_stored_offset_behind_its_data(
    tmp_path: Path,
) -> None:
    """No write yet: RocksDB has neither the updates nor their offset, so recovery replays
    the changelog from the older offset (as after a crash between commit and write)."""
    state, producer = backend(tmp_path), FakeProducer()
    ready(state, 0)
    view = state.partition("count", "in", 0)
    view.set(b"j", b"1")
    view.store.write({b"j": b"1"}, 0)  # as if written by an earlier checkpoint
    view.set(b"k", b"1")
    checkpoint(state, producer, 2)  # offsets 0 (j), 1 (k): unwritten
    view.store.close()  # the process dies: nothing more reaches RocksDB
    assert reopened(tmp_path) == ({b"j": b"1", b"k": None, b"m": None}, 0)


def test_wiping_a_store_forgets_its_unwritten_updates(tmp_path: Path) -> None:
    state, producer = backend(tmp_path), FakeProducer()
    ready(state, 0)
    view = state.partition("count", "in", 0)
    view.set(b"k", b"1")
    checkpoint(state, producer, 1)
    state.wipe([("in", 0)])
    state.close()
    assert reopened(tmp_path) == ({b"j": None, b"k": None, b"m": None}, None)


def test_the_block_cache_holds_what_state_block_cache_bytes_allows(tmp_path: Path) -> None:
    keys = [b"k%06d" % i for i in range(20_000)]
    store = StorePartition(tmp_path / "s", "t")
    store.write({k: b"v" * 100 for k in keys}, 0)
    store.close()  # flushed: reads now go through the block cache
    try:
        for capacity in (64 * 1024, 8 * 1024 * 1024):
            set_block_cache(capacity)
            store = StorePartition(tmp_path / "s", "t")
            assert all(store.get(k) is not None for k in keys)
            used = store_memory()["block_cache"]
            store.close()
            assert used <= capacity, (capacity, used)
        assert used > 1024 * 1024  # the larger cap was used: 2 MB of values were read
    finally:
        set_block_cache(64 * 1024 * 1024)


def test_partitions_of_topics_without_changelogs_hold_no_state(tmp_path: Path) -> None:
    """A regrouped pipeline's input partitions are assigned beside the repartition topic's:
    only the latter are restored and hold state (docs/state.md, Regrouping)."""
    state = backend(tmp_path)  # changelogs of topic "in" only
    state.assign([("orders", 0), ("orders", 1), ("in", 0)])
    assert state.pending_recovery() == [("in", 0)]
    state.revoke([("orders", 0)])
    state.lost([("orders", 1)])
    assert state.pending_recovery() == [("in", 0)]
    state.close()
