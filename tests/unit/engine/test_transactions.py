"""The transaction owner (app.engine.transactions) against fake clients: each call's errors and the
reaction the README table promises (retry, abort + rewind, new producer, exit)."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from app.engine.transactions import Transactions
from app.errors import CheckpointAborted, KafkaFatalError, ProducerFenced
from app.offsets import GroupOffsets
from tests.unit.fakes import FakeConsumer, FakeProducer, idle_watchdog, kafka_exc

OFFSETS = [TopicPartition("in", 0, 5)]


class Owner:
    """A Transactions with its fakes; ``producers`` = every producer it made, in order."""

    def __init__(
        self,
        call_timeout: float = 5.0,
        max_recreations: int = 3,
        assignment: tuple[tuple[str, int], ...] = (("in", 0),),
        new_epoch_per_abort: bool = True,
        retried_after: float = 60.0,
    ) -> None:
        self.producers: list[FakeProducer] = []
        self.consumer = FakeConsumer(list(assignment))
        self.discarded = 0
        self.rebound: list[FakeProducer] = []
        self.planted: list[FakeProducer] = []  # made next, before any new one
        self.txn = Transactions(
            self._new_producer,
            self.consumer,
            GroupOffsets(self.consumer, idle_watchdog(), call_timeout),
            exactly_once=True,
            call_timeout=call_timeout,
            watchdog=idle_watchdog(),
            max_recreations=max_recreations,
            new_epoch_per_abort=new_epoch_per_abort,
            retried_after=retried_after,
        )
        self.txn.on_abort(self._discard)
        self.txn.on_new_producer(self.rebound.append)

    def _new_producer(self) -> FakeProducer:
        self.producers.append(self.planted.pop(0) if self.planted else FakeProducer())
        return self.producers[-1]

    def _discard(self) -> None:
        self.discarded += 1

    @property
    def producer(self) -> FakeProducer:
        return self.producers[-1]


def test_commit_sends_offsets_then_commits() -> None:
    o = Owner()
    o.txn.init()
    o.txn.begin()
    o.txn.commit(OFFSETS)
    assert o.producer.calls == [
        "init_transactions", "begin_transaction", "send_offsets_to_transaction",
        "commit_transaction",
    ]  # fmt: skip
    o.txn.begin()  # the committed transaction is closed: a new one begins
    assert o.producer.calls[-1] == "begin_transaction"


def test_retriable_commit_error_is_retried_within_the_deadline() -> None:
    o = Owner()
    o.txn.begin()
    o.producer.fail["commit_transaction"] = [kafka_exc(KafkaError._TIMED_OUT, retriable=True)]
    o.txn.commit(OFFSETS)
    assert o.producers[0].calls.count("commit_transaction") == 2


def test_after_a_retried_transactional_call_the_next_transaction_has_a_new_epoch() -> None:
    """The timed-out request may still be in the network (librdkafka#5423: ``EndTxn``); under
    the same epoch it could end the next transaction. Nothing is rewound: all committed."""
    o = Owner()
    o.txn.begin()
    o.producer.fail["commit_transaction"] = [kafka_exc(KafkaError._TIMED_OUT, retriable=True)]
    o.txn.commit(OFFSETS)
    _first, fresh = o.producers
    assert fresh.calls == ["init_transactions"] and o.rebound == [fresh]
    assert o.consumer.seeks == [] and o.txn.epoch_bumps == 1
    o.txn.begin()
    o.txn.commit(OFFSETS)  # a clean commit: the epoch stays
    assert len(o.producers) == 2 and fresh.calls[-1] == "commit_transaction"


def test_a_call_that_lasted_past_librdkafkas_own_request_timeout_counts_as_retried() -> None:
    """librdkafka resends a timed-out EndTxn inside the call (socket.timeout.ms shorter than
    the call's timeout) and returns success: no retriable error reaches the owner, only the
    time says so. tests/chaos/test_held_endtxn.py shows the late original committing the next
    transaction without the new epoch."""
    o = Owner(retried_after=0.0)  # every call lasts at least that long
    o.txn.begin()
    o.txn.commit(OFFSETS)
    assert len(o.producers) == 2 and o.txn.epoch_bumps == 1 and o.consumer.seeks == []
    quick = Owner(retried_after=60.0)
    quick.txn.begin()
    quick.txn.commit(OFFSETS)
    assert len(quick.producers) == 1 and quick.txn.epoch_bumps == 0


def test_retries_of_an_error_that_comes_back_at_once_pause_and_back_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr("app.engine.transactions.time.sleep", pauses.append)
    o = Owner()
    o.txn.begin()
    conflict = kafka_exc(KafkaError.CONCURRENT_TRANSACTIONS, retriable=True)
    o.producer.fail["commit_transaction"] = [conflict] * 5
    o.txn.commit(OFFSETS)
    assert o.producers[0].calls.count("commit_transaction") == 6
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0]  # doubled, at most 1 s


def test_retriable_error_past_the_deadline_is_an_unknown_outcome() -> None:
    o = Owner(call_timeout=0.0)
    o.txn.begin()
    o.producer.fail["commit_transaction"] = [kafka_exc(KafkaError._TIMED_OUT, retriable=True)]
    with pytest.raises(KafkaFatalError, match="outcome is unknown"):
        o.txn.commit(OFFSETS)


def test_abortable_error_becomes_checkpoint_aborted() -> None:
    o = Owner()
    o.txn.begin()
    err = kafka_exc(KafkaError.ILLEGAL_GENERATION, txn_requires_abort=True)
    o.producer.fail["send_offsets_to_transaction"] = [err]
    with pytest.raises(CheckpointAborted, match="send_offsets_to_transaction: ILLEGAL_GENERATION"):
        o.txn.commit(OFFSETS)


@pytest.mark.parametrize(
    "err",
    [
        kafka_exc(KafkaError._FENCED, fatal=True),
        kafka_exc(KafkaError.PRODUCER_FENCED),
        kafka_exc(KafkaError.INVALID_PRODUCER_EPOCH),
        kafka_exc(KafkaError._FATAL, fatal=True),
    ],
    ids=["_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "fatal"],
)
def test_fenced_or_fatal_producer_becomes_producer_fenced(err: Exception) -> None:
    o = Owner()
    o.txn.begin()
    o.producer.fail["commit_transaction"] = [err]
    with pytest.raises(ProducerFenced):
        o.txn.commit(OFFSETS)


def test_authorization_failure_is_fatal() -> None:
    o = Owner()
    o.producer.fail["init_transactions"] = [
        kafka_exc(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal=True)
    ]
    with pytest.raises(KafkaFatalError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        o.txn.init()


def test_abort_discards_rewinds_to_committed_and_begins_again() -> None:
    o = Owner(assignment=(("in", 0), ("in", 1)))
    o.consumer.committed_offsets = {("in", 0): 7}  # in[1]: nothing committed yet
    o.txn.begin()
    o.txn.abort("test")
    aborted, fresh = o.producers
    assert aborted.calls == ["begin_transaction", "abort_transaction"]
    assert fresh.calls == ["init_transactions", "begin_transaction"]  # a new epoch
    assert o.discarded == 1 and o.rebound == [fresh] and o.txn.epoch_bumps == 1
    assert o.consumer.seeks == [("in", 0, 7), ("in", 1, OFFSET_BEGINNING)]
    o.txn.begin()  # the next transaction is already open: nothing to begin
    assert fresh.calls.count("begin_transaction") == 1


def test_no_transaction_ever_runs_on_an_aborted_producer() -> None:
    """Without Transactions V2 (KIP-890 part 2) a produce request of an aborted transaction
    still in the network could land in the next one under the same epoch: every abort is
    followed by a new producer whose init_transactions bumps the epoch. Not counted as a
    re-creation: aborts are not twins."""
    o = Owner(max_recreations=1)
    for n in range(5):
        o.txn.begin()
        o.txn.abort(f"abort {n}")
    assert len(o.producers) == 6 and o.txn.epoch_bumps == 5
    for aborted in o.producers[:-1]:
        assert aborted.calls[-1] == "abort_transaction"  # nothing after its abort
    assert o.txn.producer.calls == ["init_transactions", "begin_transaction"]


def test_with_the_same_epoch_fault_the_aborted_producer_goes_on() -> None:
    """The test rig's fault (``Faults.same_epoch_after_abort``): librdkafka's own
    behaviour, kept so the delayed-produce test can show what it lets through."""
    o = Owner(new_epoch_per_abort=False)
    o.txn.begin()
    o.txn.abort("test")
    assert len(o.producers) == 1 and o.txn.epoch_bumps == 0
    assert o.producer.calls == ["begin_transaction", "abort_transaction", "begin_transaction"]


def test_a_fenced_init_of_the_new_epoch_is_a_counted_recreation() -> None:
    """A twin that fences the new epoch's producer is what ``max_recreations`` bounds."""
    o = Owner(max_recreations=1)
    o.txn.begin()
    for _ in range(2):  # the new epoch's producer and the re-created one: both fenced
        o.planted.append(FakeProducer())
        o.planted[-1].fail["init_transactions"] = [kafka_exc(KafkaError._FENCED, fatal=True)]
    with pytest.raises(KafkaFatalError, match="re-created 1 times in a row"):
        o.txn.abort("test")
    assert len(o.producers) == 3


def test_the_epoch_policy_names_the_protection_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.engine import transactions

    renew, line = transactions.epoch_policy("2.16.0")
    assert renew and "no Transactions V2" in line and "new producer epoch" in line
    monkeypatch.setattr(transactions, "TV2_LIBRDKAFKA", (2, 20, 0))
    assert transactions.epoch_policy("2.16.0")[0]
    renew, line = transactions.epoch_policy("2.20.1")
    assert not renew and "speaks Transactions V2" in line
    assert transactions.epoch_policy("garbage")[0]  # unknown: the safe way


def test_abort_without_rewind_leaves_positions() -> None:
    o = Owner()
    o.txn.begin()
    o.txn.abort("partitions revoked", rewind=False)
    assert o.consumer.seeks == [] and o.discarded == 1


def test_a_producer_that_cannot_abort_is_recreated() -> None:
    o = Owner()
    o.txn.begin()
    o.producer.fail["abort_transaction"] = [kafka_exc(KafkaError._FENCED, fatal=True)]
    old = o.producer
    o.txn.abort("delivery failed")
    assert len(o.producers) == 2 and o.rebound == [o.producer]
    assert o.producer is not old and o.txn.producer is o.producer
    assert o.producer.calls == ["init_transactions", "begin_transaction"]
    assert o.consumer.seeks == [("in", 0, OFFSET_BEGINNING)]


def test_recreate_inits_a_new_producer_rewinds_and_begins() -> None:
    o = Owner()
    o.consumer.committed_offsets = {("in", 0): 3}
    o.txn.begin()
    o.txn.recreate("fenced")
    assert o.producer.calls == ["init_transactions", "begin_transaction"]
    assert o.consumer.seeks == [("in", 0, 3)]
    assert o.discarded == 1


def test_recreation_is_bounded_until_a_commit_succeeds() -> None:
    o = Owner(max_recreations=2)
    o.txn.recreate("fenced 1")
    o.txn.recreate("fenced 2")
    with pytest.raises(KafkaFatalError, match=r"re-created 2 times in a row.*instance_id"):
        o.txn.recreate("fenced 3")


def test_a_commit_resets_the_recreation_bound() -> None:
    o = Owner(max_recreations=1)
    o.txn.recreate("fenced 1")
    o.txn.commit(OFFSETS)
    o.txn.recreate("fenced 2")  # not fatal: a commit came in between
    assert len(o.producers) == 3


def test_new_producer_fenced_at_init_is_recreated_again() -> None:
    o = Owner()
    o.txn.begin()
    fence = kafka_exc(KafkaError._FENCED, fatal=True)

    def fenced_once() -> FakeProducer:
        producer = FakeProducer()
        if len(o.producers) == 1:
            producer.fail["init_transactions"] = [fence]
        o.producers.append(producer)
        return producer

    o.txn._new_producer = fenced_once
    o.txn.recreate("fenced")
    assert len(o.producers) == 3 and o.producer.calls == ["init_transactions", "begin_transaction"]


# ---- the group's committed offsets (rewind, recovery, the idle look) ------------------------


def test_committed_asks_again_while_the_group_coordinator_moves() -> None:
    """Nemesis seed 1, rounds 58 and 60: a rewind after a fenced producer met NOT_COORDINATOR
    (the coordinator's broker had just been killed); that ended the bridge with exit 2."""
    o = Owner()
    o.consumer.committed_offsets = {("in", 0): 7}
    o.consumer.fail["committed"] = [
        kafka_exc(KafkaError.NOT_COORDINATOR),
        kafka_exc(KafkaError.COORDINATOR_LOAD_IN_PROGRESS),
    ]
    assert [tp.offset for tp in o.txn.offsets.committed([TopicPartition("in", 0)])] == [7]
    assert o.consumer.calls.count("committed") == 3


def test_rewind_after_a_recreate_survives_a_moving_group_coordinator() -> None:
    o = Owner()
    o.consumer.committed_offsets = {("in", 0): 7}
    o.consumer.fail["committed"] = [kafka_exc(KafkaError.NOT_COORDINATOR)]
    o.txn.recreate("fenced")
    assert o.consumer.seeks == [("in", 0, 7)]


def test_committed_still_unreadable_after_the_call_timeout_is_fatal() -> None:
    o = Owner(call_timeout=0.0)
    o.consumer.fail["committed"] = [kafka_exc(KafkaError.NOT_COORDINATOR)]
    with pytest.raises(KafkaFatalError, match="committed offsets not readable"):
        o.txn.offsets.committed([TopicPartition("in", 0)])


def test_committed_error_no_retry_repairs_is_mapped_not_raw() -> None:
    o = Owner()
    o.consumer.fail["committed"] = [kafka_exc(KafkaError.GROUP_AUTHORIZATION_FAILED)]
    with pytest.raises(KafkaFatalError, match="committed offsets"):
        o.txn.offsets.committed([TopicPartition("in", 0)])
