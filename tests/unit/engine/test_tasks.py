"""One producer per input partition (app.engine.tasks) against fake producers: routing of
output, changelog and offset records, init before use, commit of every open task, and the
reactions to fencing and to a partial commit."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, TopicPartition

from app.engine.tasks import TaskAssignment, TaskProducers, task_transactional_id
from app.errors import KafkaFatalError
from app.offsets.target import decode_key
from app.sink.collector import RecordCollector
from tests.unit.fakes import FakeProducer, RecordingGuard, idle_watchdog, kafka_exc


class Rig:
    """``made``: the latest producer of each transactional id; ``every``: all, in order."""

    def __init__(
        self, shared: bool = False, new_epoch_per_abort: bool = True, retried_after: float = 60.0
    ) -> None:
        self.made: dict[str, FakeProducer] = {}
        self.every: list[tuple[str, FakeProducer]] = []
        self.tasks = TaskProducers(
            self._new,
            (lambda _: "g-instance") if shared else (lambda n: task_transactional_id("g", n)),
            idle_watchdog(),
            5.0,
            new_epoch_per_abort=new_epoch_per_abort,
            retried_after=retried_after,
        )

    def _new(self, txn_id: str) -> FakeProducer:
        self.made[txn_id] = FakeProducer()
        self.every.append((txn_id, self.made[txn_id]))
        return self.made[txn_id]


def test_a_task_producer_is_initialised_when_assigned_before_any_record() -> None:
    rig = Rig()
    rig.tasks.assign([0, 2])
    assert sorted(rig.made) == ["g-task-0", "g-task-2"]
    assert all(p.calls == ["init_transactions"] for p in rig.made.values())


def test_records_go_through_the_selected_task_whatever_their_partition() -> None:
    """With keep_partition an output names its partition; that must not move it to another
    task's transaction. Changelog runs reach their partition's task because the one writer
    selects it (an explicit route), not because of their partition number."""
    rig = Rig()
    rig.tasks.assign([0, 1])
    rig.tasks.select(1)
    rig.tasks.produce("out", b"v1", b"k", 0)  # task 1's output, to output partition 0
    RecordCollector(rig.tasks).send_run("g-count-changelog", 0, {b"k": b"c0"}, [], print)
    rig.tasks.select(1)
    RecordCollector(rig.tasks).send("out", b"v1b", b"k", None, 1, 7)
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v0", b"k", 1)
    p0, p1 = rig.made["g-task-0"], rig.made["g-task-1"]
    assert [r[1] for r in p0.produced] == [b"c0", b"v0"]
    assert [r[1] for r in p1.produced] == [b"v1", b"v1b"]
    assert p0.calls.count("begin_transaction") == p1.calls.count("begin_transaction") == 1


def test_a_record_without_a_selected_task_is_refused() -> None:
    rig = Rig()
    rig.tasks.assign([0])
    with pytest.raises(KafkaFatalError, match="no task selected"):
        rig.tasks.produce("out", b"v", b"k", 0)


def test_offsets_go_through_the_task_of_their_partition() -> None:
    from app.offsets.target import TargetOffsets

    rig = Rig()
    rig.tasks.assign([0, 1])
    store = TargetOffsets.__new__(TargetOffsets)
    store.topic, store._group, store._writer = "g.offsets", "g", "x"
    store.put(rig.tasks, [TopicPartition("in", 0, 4), TopicPartition("in", 1, 9)], 1.0)
    assert [decode_key(r[2]) for r in rig.made["g-task-0"].produced] == [("g", "in", 0)]
    assert [decode_key(r[2]) for r in rig.made["g-task-1"].produced] == [("g", "in", 1)]


def test_commit_commits_every_open_task_and_only_those() -> None:
    rig = Rig()
    rig.tasks.assign([0, 1, 2])
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v", None)
    rig.tasks.select(2)
    rig.tasks.produce("out", b"v", None)
    rig.tasks.commit_transaction(5)
    assert [p.calls.count("commit_transaction") for p in rig.made.values()] == [1, 0, 1]
    rig.tasks.commit_transaction(5)  # nothing open: nothing more
    assert sum(p.calls.count("commit_transaction") for p in rig.made.values()) == 2


def test_a_failure_after_another_task_committed_exits() -> None:
    rig = Rig()
    rig.tasks.assign([0, 1])
    for task in (0, 1):
        rig.tasks.select(task)
        rig.tasks.produce("out", b"v", None)
    rig.made["g-task-1"].fail["commit_transaction"].append(
        kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    )
    with pytest.raises(KafkaFatalError, match="after 1 other task"):
        rig.tasks.commit_transaction(5)


def test_an_abortable_failure_of_the_first_task_is_left_to_the_ladder() -> None:
    rig = Rig()
    rig.tasks.assign([0])
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v", None)
    error = kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    rig.made["g-task-0"].fail["commit_transaction"].append(error)
    with pytest.raises(type(error)):
        rig.tasks.commit_transaction(5)
    aborted = rig.made["g-task-0"]
    rig.tasks.abort_transaction(5)
    assert aborted.calls[-1] == "abort_transaction"
    assert rig.made["g-task-0"] is not aborted  # the next transaction: a new epoch


def test_an_abort_gives_each_aborted_task_a_new_epoch_and_leaves_the_others() -> None:
    """No Transactions V2: a produce request of an aborted transaction still in the network
    must not land in the task's next one, so each aborted task's next transaction runs on a
    new, initialised producer (a new epoch); a task with no open transaction keeps its own."""
    rig = Rig()
    rig.tasks.assign([0, 1])
    idle = rig.made["g-task-1"]
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v", None)
    aborted = rig.made["g-task-0"]
    rig.tasks.abort_transaction(5)
    fresh = rig.made["g-task-0"]
    assert fresh is not aborted and fresh.calls == ["init_transactions"]
    assert rig.made["g-task-1"] is idle and rig.tasks.epoch_bumps == 1
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v2", None)  # the next transaction: on the new producer
    assert fresh.calls == ["init_transactions", "begin_transaction", "produce"]
    assert aborted.calls.count("produce") == 1


def test_a_task_whose_commit_was_retried_or_slow_gets_a_new_epoch_after_it() -> None:
    """A retried commit (or one lasting librdkafka's own resend time) may have left an EndTxn
    in the network: that task's next transaction runs on a new producer; the others keep
    theirs (tests/chaos/test_held_endtxn.py shows the hazard for the one producer)."""
    rig = Rig()
    rig.tasks.assign([0, 1])
    for task in (0, 1):
        rig.tasks.select(task)
        rig.tasks.produce("out", b"v", None)
    retried, kept = rig.made["g-task-0"], rig.made["g-task-1"]
    retried.fail["commit_transaction"].append(kafka_exc(KafkaError._TIMED_OUT, retriable=True))
    with pytest.raises(Exception, match="_TIMED_OUT"):
        rig.tasks.commit_transaction(5)
    rig.tasks.commit_transaction(5)  # the ladder asks again: both commit
    assert rig.made["g-task-0"] is not retried and rig.made["g-task-1"] is kept
    assert rig.tasks.epoch_bumps == 1
    slow = Rig(retried_after=0.0)  # every commit lasts that long
    slow.tasks.assign([0])
    slow.tasks.select(0)
    slow.tasks.produce("out", b"v", None)
    first = slow.made["g-task-0"]
    slow.tasks.commit_transaction(5)
    assert slow.made["g-task-0"] is not first and slow.tasks.epoch_bumps == 1


def test_with_the_same_epoch_fault_an_aborted_task_keeps_its_producer() -> None:
    rig = Rig(new_epoch_per_abort=False)
    rig.tasks.assign([0])
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v", None)
    aborted = rig.made["g-task-0"]
    rig.tasks.abort_transaction(5)
    assert rig.made["g-task-0"] is aborted and len(rig.every) == 1


def test_a_fenced_task_producer_exits_instead_of_fencing_the_new_owner() -> None:
    rig = Rig()
    rig.tasks.assign([0])
    rig.tasks.select(0)
    rig.tasks.produce("out", b"v", None)
    rig.made["g-task-0"].fail["commit_transaction"].append(kafka_exc(KafkaError._FENCED))
    with pytest.raises(KafkaFatalError, match="another instance owns"):
        rig.tasks.commit_transaction(5)
    rig.tasks.abort_transaction(5)  # leaving: a fenced producer is not asked to abort
    assert rig.made["g-task-0"].calls == [
        "init_transactions", "begin_transaction", "produce", "commit_transaction"
    ]  # fmt: skip


def test_revoke_releases_the_producer_and_a_reassigned_task_is_initialised_again() -> None:
    rig = Rig()
    rig.tasks.assign([0, 1])
    first = rig.made["g-task-1"]
    rig.tasks.revoke([1])
    assert rig.tasks.tasks == [0]
    rig.tasks.select(1)
    with pytest.raises(KafkaFatalError, match="not assigned here"):
        rig.tasks.produce("out", b"v", None)
    rig.tasks.assign([1])
    assert rig.made["g-task-1"] is not first and rig.made["g-task-1"].calls == ["init_transactions"]


def test_the_unsafe_test_switch_shares_one_producer() -> None:
    rig = Rig(shared=True)
    rig.tasks.assign([0, 1, 2])
    assert list(rig.made) == ["g-instance"]


def test_assignment_fences_first_then_starts_at_the_stored_positions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    order: list[str] = []

    class Store:
        def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
            order.append("committed")
            return [TopicPartition(tp.topic, tp.partition, 7 if tp.partition else -1001)
                    for tp in partitions]  # fmt: skip

        def put(self, *_: object) -> None: ...
        def commit(self, _: list[TopicPartition]) -> None: ...

    rig = Rig()
    original = rig._new

    def new(txn_id: str) -> FakeProducer:
        order.append(f"new {txn_id}")
        return original(txn_id)

    rig.tasks._new_producer = new
    assignment = TaskAssignment(rig.tasks, Store(), reset_offset=-2)
    with caplog.at_level("INFO", logger="app.engine.tasks"):
        starts = assignment.assign([TopicPartition("in", 0), TopicPartition("in", 1)])
    assert order == ["new g-task-0", "new g-task-1", "committed"]
    assert [(tp.partition, tp.offset) for tp in starts] == [(0, -2), (1, 7)]
    # the log says it in words, not librdkafka's -1001 (issue 56)
    assert "starting at in[0]@no position, in[1]@7" in caplog.text, caplog.text


def test_init_transactions_is_bounded_by_the_bridges_stuck_call_deadline() -> None:
    guard = RecordingGuard()
    tasks = TaskProducers(lambda _: FakeProducer(), lambda n: f"g-task-{n}", guard, 30.0, 12.0)
    tasks.assign([0, 1])
    assert guard.deadlines == [("init_transactions of g-task-0", 12.0),
                               ("init_transactions of g-task-1", 12.0)]  # fmt: skip
    fallback = RecordingGuard()
    TaskProducers(lambda _: FakeProducer(), lambda n: f"g-task-{n}", fallback, 30.0).assign([0])
    assert fallback.deadlines == [("init_transactions of g-task-0", 45.0)]  # call_timeout + 15 s


def test_a_retriable_init_error_is_asked_again_after_a_doubling_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr("app.engine.tasks.time.sleep", pauses.append)
    rig = Rig()
    producer = FakeProducer()
    conflict = kafka_exc(KafkaError.CONCURRENT_TRANSACTIONS, retriable=True)
    producer.fail["init_transactions"] = [conflict] * 5
    rig.tasks._new_producer = lambda _: producer
    rig.tasks.assign([0])
    assert producer.calls.count("init_transactions") == 6
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0]  # as Transactions: doubled, at most 1 s
