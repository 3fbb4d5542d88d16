"""The checkpoint's numbered steps and the rebalancer's reactions, with fake collaborators."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from app.engine.checkpoint import Checkpoint
from app.engine.ladder import Ladder
from app.engine.rebalance import Rebalancer
from app.engine.repair import PartitionRepair
from app.engine.transactions import Transactions
from app.errors import CheckpointAborted
from app.offsets import GroupOffsets
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.sink.refusals import Refusals
from app.state.backend import NoState
from tests.support.faults import bridge_faults
from tests.unit.fakes import FakeConsumer, FakeProducer, idle_watchdog, kafka_exc


class StepLog(NoState):
    """Records which checkpoint steps of the state backend ran, into a shared list."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.revoked: list[tuple[str, int]] = []
        self.lost_partitions: list[tuple[str, int]] = []

    def produce_changelogs(self, sink: Any, positions: dict[tuple[str, int], int]) -> None:
        self.log.append(f"changelogs {sorted(positions.items())}")

    def verify_delivery(self) -> None:
        self.log.append("verify")

    def after_commit(self) -> None:
        self.log.append("state write")

    def discard(self) -> None:
        self.log.append("discard")

    def revoke(self, partitions: list[tuple[str, int]]) -> None:
        self.revoked += partitions

    def lost(self, partitions: list[tuple[str, int]]) -> None:
        self.lost_partitions += partitions


class FlushLog:
    collector = None  # the writer the changelogs go to: StepLog ignores it

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def flush(self, timeout: float) -> None:
        self.log.append("flush")

    def checkpoint_committed(self, consumed: int) -> None:
        self.log.append("dead letters accounted")


class Rig:
    """A checkpoint (and its rebalancer) over fakes; ``log`` = the state and flush steps."""

    def __init__(
        self,
        abort_every_k: int = 0,
        max_age: float = 30.0,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        incremental: bool = False,
        assignment: list[tuple[str, int]] | None = None,
    ) -> None:
        self.log: list[str] = []
        self.producer = FakeProducer()
        self.consumer = FakeConsumer(assignment, incremental=incremental)
        self.consumer.positions = {("in", 0): 10}
        self.metrics = Metrics()
        self.txn = Transactions(
            lambda: self.producer, self.consumer, GroupOffsets(self.consumer, idle_watchdog(), 5.0),
            exactly_once=True, call_timeout=5.0, watchdog=idle_watchdog(),
        )  # fmt: skip
        self.state = StepLog(self.log)
        self.txn.on_abort(self.state.discard)
        self.checkpoint = Checkpoint(
            self.consumer, self.txn, FlushLog(self.log), self.state, self.metrics,  # type: ignore[arg-type]
            interval=interval, every=0, flush_timeout=5.0, max_age=max_age,
            faults=bridge_faults(abort_every_k), clock=clock,
        )  # fmt: skip
        self.health = health = Health(30.0)
        state: Any = self.state
        self.repair = repair = PartitionRepair(
            self.consumer, self.txn.offsets, state, health, self.metrics, -2, incremental
        )
        ladder = Ladder(self.txn, Refusals(), self.metrics, repair)
        self.rebalancer = Rebalancer(
            self.consumer, self.checkpoint, state, self.metrics, health,
            self.txn.offsets, ladder, None, incremental,
        )  # fmt: skip
        self.txn.begin()

    def aborts(self, reason: str) -> float | None:
        return self.metrics.registry.get_sample_value(
            "eos_bridge_transaction_aborts_total", {"reason": reason}
        )

    def callback(self, name: str) -> None:
        self.callback_with(name, [TopicPartition("in", 0)])

    def callback_with(self, name: str, partitions: list[TopicPartition]) -> None:
        self.rebalancer.callbacks()[name](self.consumer, partitions)


def test_commit_runs_its_steps_in_order() -> None:
    rig = Rig()
    rig.checkpoint.record(5, started=0.0)
    rig.checkpoint.commit()
    assert rig.log == [
        "changelogs [(('in', 0), 10)]", "flush", "verify", "dead letters accounted", "state write",
    ]  # fmt: skip
    assert rig.producer.calls[-3:] == [
        "send_offsets_to_transaction", "commit_transaction", "begin_transaction",
    ]  # fmt: skip
    assert rig.checkpoint.consumed == 0


def test_offsets_go_into_the_transaction_before_the_flush_and_the_commit_after_it() -> None:
    """The offsets' round trips overlap the last produce acknowledgements (issue 34)."""
    rig = Rig()
    flushed_after: list[list[str]] = []
    rig.checkpoint._output.flush = lambda timeout: flushed_after.append(list(rig.producer.calls))
    rig.checkpoint.record(5, started=0.0)
    rig.checkpoint.commit()
    assert flushed_after[0][-1] == "send_offsets_to_transaction"
    assert rig.producer.calls[-2:] == ["commit_transaction", "begin_transaction"]


def test_an_empty_checkpoint_commits_nothing() -> None:
    rig = Rig()
    rig.checkpoint.commit()
    assert rig.log == [] and "commit_transaction" not in rig.producer.calls


def test_a_failed_commit_writes_no_local_state() -> None:
    rig = Rig()
    rig.producer.fail["commit_transaction"] = [
        kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    ]
    rig.checkpoint.record(1, started=0.0)
    with pytest.raises(CheckpointAborted):
        rig.checkpoint.commit()
    assert "state write" not in rig.log


def test_fault_injection_aborts_every_kth_checkpoint_with_its_own_reason() -> None:
    rig = Rig(abort_every_k=2)
    rig.checkpoint.record(1, started=0.0)
    rig.checkpoint.commit()
    rig.checkpoint.record(1, started=0.0)
    with pytest.raises(CheckpointAborted, match="fault injection") as raised:
        rig.checkpoint.commit()
    assert raised.value.reason == "fault_injection"
    assert rig.producer.calls.count("commit_transaction") == 1


def test_an_old_transaction_is_due_whatever_the_interval() -> None:
    """interval=60 s, but the open transaction's first record is older than max_age / 2."""
    rig = Rig(max_age=10.0)
    assert not rig.checkpoint.due()  # nothing consumed: never due
    rig.checkpoint.record(1, started=rig.checkpoint.started - 6.0)
    assert rig.checkpoint.time_left() < 5.0 and rig.checkpoint.due()


class Clock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _commit_taking(rig: Rig, clock: Clock, seconds: float) -> None:
    """A checkpoint whose flush takes ``seconds``."""
    rig.checkpoint._output.flush = lambda timeout: setattr(clock, "now", clock.now + seconds)
    rig.checkpoint.commit()


def test_the_interval_counts_from_the_previous_checkpoints_start() -> None:
    """Kafka Streams' rule: a record waits at most about one interval plus one commit (from
    the end, as before, it waited up to an interval plus two)."""
    clock = Clock()
    rig = Rig(interval=1.0, clock=clock)
    rig.checkpoint.record(5, started=0.0)
    clock.now = 0.99
    assert not rig.checkpoint.due()
    clock.now = 1.0
    assert rig.checkpoint.due()
    _commit_taking(rig, clock, 0.25)  # began at 1.0, ended at 1.25
    rig.checkpoint.record(5, started=1.25)
    clock.now = 1.99
    assert not rig.checkpoint.due()
    clock.now = 2.0  # an interval after the start; counted from the end it would be 2.25
    assert rig.checkpoint.due()


def test_a_commit_slower_than_the_interval_leaves_a_minimum_pause() -> None:
    """Flink's minimum pause: half an interval after the end, so the loop still runs batches
    between two slow commits instead of committing one batch at a time."""
    clock = Clock()
    rig = Rig(interval=1.0, clock=clock)
    rig.checkpoint.record(5, started=0.0)
    clock.now = 1.0
    _commit_taking(rig, clock, 1.25)  # began at 1.0, ended at 2.25
    rig.checkpoint.record(5, started=2.25)
    clock.now = 2.74
    assert not rig.checkpoint.due()
    clock.now = 2.75
    assert rig.checkpoint.due()


def test_an_aborted_checkpoint_restarts_the_interval_from_now() -> None:
    clock = Clock()
    rig = Rig(interval=1.0, clock=clock, abort_every_k=1)
    rig.checkpoint.record(5, started=0.0)
    clock.now = 1.0
    with pytest.raises(CheckpointAborted):
        _commit_taking(rig, clock, 0.25)
    rig.checkpoint.abandon()  # at 1.25: the rewound records are read again from here
    rig.checkpoint.record(5, started=1.25)
    clock.now = 2.24
    assert not rig.checkpoint.due()
    clock.now = 2.25
    assert rig.checkpoint.due()


# ---- positions that moved with nothing consumed (an upstream abort, markers) ----------------


def test_idle_positions_at_the_committed_offsets_commit_nothing() -> None:
    rig = Rig(interval=0.0)
    rig.consumer.committed_offsets = {("in", 0): 10}
    assert not rig.checkpoint.due()
    rig.checkpoint.commit()
    assert "commit_transaction" not in rig.producer.calls


def test_idle_positions_past_the_committed_offsets_commit_offsets_only() -> None:
    """The consumer stepped over an aborted transaction and its marker (7 → 10), nothing
    consumed: the new position is committed, without dead-letter accounting."""
    rig = Rig(interval=0.0)
    rig.consumer.committed_offsets = {("in", 0): 7}
    assert rig.checkpoint.due()
    rig.checkpoint.commit()
    assert rig.producer.sent_offsets == [[("in", 0, 10)]]
    assert rig.producer.calls[-2:] == ["commit_transaction", "begin_transaction"]
    assert "dead letters accounted" not in rig.log
    assert not rig.checkpoint.due()  # committed now: known here, not asked again
    assert rig.consumer.calls.count("committed") == 1


def test_idle_moves_are_looked_at_once_an_interval() -> None:
    rig = Rig(interval=60.0)
    rig.consumer.committed_offsets = {("in", 0): 7}
    assert not rig.checkpoint.due()
    assert "committed" not in rig.consumer.calls


def test_a_partition_never_committed_counts_from_offset_zero() -> None:
    rig = Rig(interval=0.0)
    rig.consumer.positions = {("in", 0): 0}
    assert not rig.checkpoint.due()
    rig.consumer.positions = {("in", 0): 2}  # an aborted record and its marker at the start
    assert rig.checkpoint.due()


def test_committed_offsets_unavailable_means_not_due_yet() -> None:
    rig = Rig(interval=0.0)
    rig.consumer.fail["committed"] = [kafka_exc(KafkaError.GROUP_AUTHORIZATION_FAILED)]
    assert not rig.checkpoint.due()
    rig.consumer.committed_offsets = {("in", 0): 7}
    assert rig.checkpoint.due()  # asked again at the next interval


def test_an_offsets_only_commit_is_not_a_fault_injection_turn() -> None:
    rig = Rig(interval=0.0, abort_every_k=1)
    rig.consumer.committed_offsets = {("in", 0): 7}
    assert rig.checkpoint.due()
    rig.checkpoint.commit()
    assert rig.producer.calls.count("commit_transaction") == 1


def test_revoked_partitions_committed_offsets_are_asked_again() -> None:
    rig = Rig(interval=0.0)
    rig.consumer.committed_offsets = {("in", 0): 10}
    assert not rig.checkpoint.due()
    rig.callback("on_revoke")  # another owner may commit them now
    assert not rig.checkpoint.due()
    assert rig.consumer.calls.count("committed") == 2


class CountingConsumer(FakeConsumer):
    """Counts assignment() calls: librdkafka serves them on its main thread, a round trip."""

    def __init__(self, assignment: list[tuple[str, int]]) -> None:
        super().__init__(assignment)
        self.assignment_calls = 0

    def assignment(self) -> list[TopicPartition]:
        self.assignment_calls += 1
        return super().assignment()


def test_checkpoints_read_the_assignment_from_the_callbacks_not_the_consumer() -> None:
    rig = Rig()
    rig.consumer = consumer = CountingConsumer([("in", 0), ("in", 1)])
    rig.checkpoint._consumer = consumer
    consumer.positions = {("in", 0): 10, ("in", 1): 4}
    rig.rebalancer.callbacks()["on_assign"](
        consumer, [TopicPartition("in", 0), TopicPartition("in", 1)]
    )
    for offset in (11, 12):
        consumer.positions[("in", 0)] = offset
        rig.checkpoint.record(1, started=0.0)
        rig.checkpoint.commit()
    assert consumer.assignment_calls == 0
    rig.callback("on_revoke")  # ("in", 0) goes: its position is read no more
    consumer.positions[("in", 1)] = 5
    rig.checkpoint.record(1, started=0.0)
    rig.checkpoint.commit()
    assert rig.producer.sent_offsets[-1] == [("in", 1, 5)]


def test_only_partitions_that_moved_since_the_last_commit_send_offsets() -> None:
    rig = Rig()
    rig.consumer = consumer = FakeConsumer([("in", 0), ("in", 1)])
    rig.checkpoint._consumer = consumer
    consumer.positions = {("in", 0): 10, ("in", 1): 4}
    rig.checkpoint.record(2, started=0.0)
    rig.checkpoint.commit()
    consumer.positions[("in", 1)] = 7  # only partition 1 had records since
    rig.checkpoint.record(3, started=0.0)
    rig.checkpoint.commit()
    assert rig.producer.sent_offsets == [[("in", 0, 10), ("in", 1, 4)], [("in", 1, 7)]]


def test_time_left_is_the_whole_budget_before_the_first_record() -> None:
    rig = Rig(max_age=10.0)
    assert rig.checkpoint.time_left() == 10.0


# ---- the rebalancer ------------------------------------------------------------------------


def test_revoke_commits_what_was_processed() -> None:
    rig = Rig()
    rig.checkpoint.record(3, started=0.0)
    rig.callback("on_revoke")
    assert "commit_transaction" in rig.producer.calls and rig.state.revoked == [("in", 0)]
    rig.rebalancer.raise_pending()  # nothing went wrong


def test_revoke_with_an_abortable_commit_aborts_through_the_owner_without_rewind() -> None:
    rig = Rig()
    rig.producer.fail["commit_transaction"] = [
        kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    ]
    rig.checkpoint.record(3, started=0.0)
    rig.callback("on_revoke")
    assert "abort_transaction" in rig.producer.calls and "discard" in rig.log
    assert rig.consumer.seeks == []  # the partitions go: nothing to rewind
    assert rig.aborts("commit_failed") == 1


def test_lost_partitions_abort_through_the_owner() -> None:
    rig = Rig()
    rig.callback("on_lost")
    assert "abort_transaction" in rig.producer.calls and rig.state.lost_partitions == [("in", 0)]
    assert rig.aborts("partitions_lost") == 1


def test_a_callback_error_is_raised_in_the_loop() -> None:
    rig = Rig()
    rig.producer.fail["commit_transaction"] = [
        kafka_exc(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal=True)
    ]
    rig.checkpoint.record(3, started=0.0)
    rig.callback("on_revoke")  # must not raise here
    with pytest.raises(Exception, match="AUTHORIZATION"):
        rig.rebalancer.raise_pending()


class SlicedRecovery(StepLog):
    """A state whose restore finishes one partition per recover() call (a slow restore that
    outlasts the loop's recovery budget)."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(log)
        self.pending: list[tuple[str, int]] = []

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        self.pending = sorted(partitions)

    def pending_recovery(self) -> list[tuple[str, int]]:
        return list(self.pending)

    def recover(self, committed: dict[tuple[str, int], int], budget_s: float) -> bool:
        self.pending = self.pending[1:]
        return not self.pending


def test_partitions_restored_over_several_calls_are_all_resumed() -> None:
    """Regression: only the partitions still pending at the last recover() call were resumed;
    those restored in earlier calls stayed paused for good (seen under load)."""
    rig = Rig()
    state = SlicedRecovery(rig.log)
    rig.rebalancer._state = state  # type: ignore[assignment]
    three = [TopicPartition("in", p) for p in range(3)]
    rig.consumer.committed_offsets = {("in", p): 0 for p in range(3)}
    rig.rebalancer.callbacks()["on_assign"](rig.consumer, three)
    assert sorted(rig.consumer.paused) == [("in", 0), ("in", 1), ("in", 2)]
    for _ in range(3):
        rig.rebalancer.recover(0.01)
    assert sorted(rig.consumer.resumed) == [("in", 0), ("in", 1), ("in", 2)]


class WipedOnce(SlicedRecovery):
    """A state that has nothing to restore until a partition is wiped (state corrupted)."""

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        self.pending = []

    def wipe(self, partitions: list[tuple[str, int]]) -> None:
        self.pending = sorted(partitions)


def test_a_partition_revoked_while_restoring_is_not_paused_when_it_comes_back_restored() -> None:
    """librdkafka keeps a partition's pause across unassign and assign (FakeConsumer.pausing
    does too): one revoked mid-restore that comes back with nothing left to restore (its
    changelog read to the end meanwhile) must be resumed by the assign, or it stalls for good."""
    rig = Rig()
    state = SlicedRecovery(rig.log)
    rig.rebalancer._state = state  # type: ignore[assignment]
    one = [TopicPartition("in", 0)]
    rig.consumer.committed_offsets = {("in", 0): 0}
    callbacks = rig.rebalancer.callbacks()
    callbacks["on_assign"](rig.consumer, one)
    assert rig.consumer.pausing == {("in", 0)}  # restoring
    callbacks["on_revoke"](rig.consumer, one)
    state.assign = lambda partitions: None  # type: ignore[method-assign]  # nothing pending now
    state.pending = []
    callbacks["on_assign"](rig.consumer, one)
    rig.rebalancer.raise_pending()
    assert rig.consumer.pausing == set()


def test_a_partition_wiped_and_restored_again_is_resumed() -> None:
    """The ladder's repair pauses a partition whose state is corrupted and restores it from the
    changelog; the rebalancer's recover() resumes it when that restore is done."""
    rig = Rig()
    state = WipedOnce(rig.log)
    rig.rebalancer._state = state  # type: ignore[assignment]
    repair = PartitionRepair(
        rig.consumer,
        rig.txn.offsets,
        state,
        Health(30.0),
        rig.metrics,
        -2,
    )
    rig.rebalancer.callbacks()["on_assign"](rig.consumer, [TopicPartition("in", 0)])
    assert rig.consumer.pausing == set()
    repair.restore_again([("in", 0)])
    assert rig.consumer.pausing == {("in", 0)}
    rig.rebalancer.recover(0.01)  # SlicedRecovery: one partition restored per call
    assert rig.consumer.pausing == set()
