"""The error ladder: every Kafka error class against the reaction the README table promises.

First the classifier (app.kafka.errors, by code and flags only), then the loop
(app.engine.loop.Bridge.run) with fake clients: each error, raised where librdkafka raises it, must
lead to exactly its reaction — retry, abort + rewind, a new producer, a wiped store, an exit.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from app.engine.checkpoint import Checkpoint
from app.engine.decoding import consumer_error
from app.engine.loop import LoopSettings
from app.engine.transactions import Transactions
from app.engine.wiring import assemble
from app.errors import (
    CheckpointAborted,
    ConfigError,
    InstanceFenced,
    KafkaFatalError,
    OutputRefused,
    PartitionsMigrated,
    RecordRefused,
    StateCorrupted,
)
from app.kafka.errors import Reaction, classify, classify_consumer, record_refused, settling
from app.offsets import GroupOffsets
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline.builder import Pipeline
from app.pipeline.record import Row
from app.serde import formats
from app.sink.collector import RecordCollector
from app.sink.output import Output
from app.state.backend import NoState
from tests.unit.fakes import FakeConsumer, FakeMessage, FakeProducer, idle_watchdog, kafka_exc

JSON, RAW = formats(), formats("bytes")

# ---- the classifier ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "flags", "reaction"),
    [
        (KafkaError._TIMED_OUT, {"retriable": True}, Reaction.RETRY),
        (KafkaError.COORDINATOR_NOT_AVAILABLE, {"retriable": True}, Reaction.RETRY),
        (KafkaError._STATE, {"txn_requires_abort": True}, Reaction.ABORT),
        (KafkaError.ILLEGAL_GENERATION, {"txn_requires_abort": True}, Reaction.ABORT),
        (KafkaError.MSG_SIZE_TOO_LARGE, {}, Reaction.ABORT),
        (KafkaError.INVALID_TIMESTAMP, {}, Reaction.ABORT),
        (KafkaError.POLICY_VIOLATION, {}, Reaction.ABORT),
        (KafkaError._FENCED, {"fatal": True}, Reaction.RECREATE),
        (KafkaError.PRODUCER_FENCED, {"retriable": True}, Reaction.RECREATE),
        (KafkaError.INVALID_PRODUCER_EPOCH, {}, Reaction.RECREATE),
        (KafkaError.UNKNOWN_PRODUCER_ID, {}, Reaction.RECREATE),
        (KafkaError._FATAL, {"fatal": True}, Reaction.RECREATE),
        (KafkaError._FATAL, {}, Reaction.RECREATE),
        (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, {"fatal": True}, Reaction.FATAL),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, {}, Reaction.FATAL),
        (KafkaError._INVALID_ARG, {}, Reaction.FATAL),
    ],
)
def test_producer_errors_are_classified_by_code_and_flags(
    code: int, flags: dict[str, bool], reaction: Reaction
) -> None:
    assert classify(kafka_exc(code, **flags)) is reaction
    assert classify(KafkaError(code, "any text at all", **flags)) is reaction


def test_an_error_that_is_not_kafkas_is_fatal() -> None:
    assert classify(ValueError("fenced")) is Reaction.FATAL  # the text does not matter


@pytest.mark.parametrize(
    ("code", "flags", "reaction"),
    [
        (KafkaError._FATAL, {"fatal": True}, Reaction.INSTANCE_FENCED),
        (KafkaError._FATAL, {}, Reaction.INSTANCE_FENCED),  # as consume() really delivers it
        (KafkaError.FENCED_INSTANCE_ID, {}, Reaction.INSTANCE_FENCED),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, {}, Reaction.FATAL),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, {}, Reaction.FATAL),
        (KafkaError._TRANSPORT, {}, Reaction.RETRY),
        (KafkaError._MSG_TIMED_OUT, {}, Reaction.RETRY),
    ],
)
def test_consumer_errors(code: int, flags: dict[str, bool], reaction: Reaction) -> None:
    assert classify_consumer(KafkaError(code, "x", **flags)) is reaction


def test_record_refusals_and_settling_lookups() -> None:
    assert record_refused(kafka_exc(KafkaError.MSG_SIZE_TOO_LARGE))
    assert record_refused(KafkaError(KafkaError.POLICY_VIOLATION))
    assert not record_refused(kafka_exc(KafkaError._MSG_TIMED_OUT))
    assert settling(kafka_exc(KafkaError.NOT_LEADER_FOR_PARTITION))
    assert settling(kafka_exc(KafkaError._TIMED_OUT, retriable=True))
    assert settling(kafka_exc(KafkaError.FENCED_LEADER_EPOCH))  # an election in flight
    assert not settling(kafka_exc(KafkaError.TOPIC_AUTHORIZATION_FAILED))


# ---- the loop ------------------------------------------------------------------------------


class FaultyState(NoState):
    """A stateless backend whose checkpoint step 1 raises the queued errors, one per call."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []
        self.wiped: list[tuple[str, int]] = []

    def produce_changelogs(self, sink: Any, positions: dict[tuple[str, int], int]) -> None:
        if self.errors:
            raise self.errors.pop(0)

    def wipe(self, partitions: list[tuple[str, int]]) -> None:
        self.wiped += partitions


class Harness:
    """A Bridge over fakes: one input record at in[0]@0, a checkpoint after every record."""

    def __init__(
        self, messages: list[FakeMessage] | None = None, pipeline: Pipeline | None = None
    ) -> None:
        self.producers: list[FakeProducer] = []
        self.consumer = FakeConsumer()
        self.consumer.positions = {("in", 0): 1}
        self.consumer.batches = [messages or [FakeMessage(offset=0)]]
        self.metrics = Metrics()
        self.state = FaultyState()
        watchdog = idle_watchdog()
        self.txn = Transactions(
            self._new_producer, self.consumer, GroupOffsets(self.consumer, watchdog, 5.0),
            exactly_once=True, call_timeout=5.0, watchdog=watchdog,
        )  # fmt: skip
        self.output = output = Output(
            RecordCollector(self.txn.producer), "out", "dlq", 1_000_000, lambda topic: True
        )
        checkpoint = Checkpoint(
            self.consumer, self.txn, output, self.state, self.metrics,
            interval=60.0, every=1, flush_timeout=5.0,
        )  # fmt: skip
        loop = LoopSettings(
            topics=["in"], instance_id="i0", batch_size=10, poll_timeout=0.0, retries=0,
            dead_letter=True,
        )  # fmt: skip
        self.bridge = assemble(
            self.consumer, self.txn, output, pipeline or Pipeline(), self.state, checkpoint,
            self.metrics, Health(30.0), watchdog, loop, JSON,
        )  # fmt: skip
        self.consumer.on_empty = self._stop

    def _new_producer(self) -> FakeProducer:
        self.producers.append(FakeProducer())
        return self.producers[-1]

    def _stop(self) -> None:
        self.bridge.stopping = True

    def aborts(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "eos_bridge_transaction_aborts_total", {"reason": reason}
        )
        return value or 0.0

    def commits(self) -> int:
        return sum(p.calls.count("commit_transaction") for p in self.producers)


def test_a_clean_run_commits_once_and_never_aborts() -> None:
    h = Harness()
    h.bridge.run()
    assert h.commits() == 1 and len(h.producers) == 1
    assert h.consumer.seeks == []


def test_a_pipeline_that_starts_by_counting_never_parses_values() -> None:
    """count reads the key alone: a value that is not JSON is counted, not dead-lettered;
    a pipeline that reads values dead-letters it as a deserialization error."""
    bad = FakeMessage(value=b"not json", key=b"k")
    rows, failures = Harness(pipeline=Pipeline().count()).bridge._decode_batch([bad])
    assert [r.value for r in rows] == [b"not json"] and failures == []
    rows, failures = Harness(pipeline=Pipeline().map(dict)).bridge._decode_batch([bad])
    assert rows == [] and [f.step for f in failures] == ["deserialize"]
    assert "in[0]@0: not JSON" in str(failures[0].error)


def test_an_offset_fetch_librdkafka_gives_up_on_is_re_assigned_at_the_committed_offsets() -> None:
    """librdkafka #5586: after "Failed to fetch committed offsets" (a request-level
    NOT_COORDINATOR) the partitions are never fetched; the bridge aborts what is open and
    assigns them again with explicit offsets (committed, or the reset policy without one)."""
    unfetched = KafkaError(
        KafkaError.NOT_COORDINATOR,
        'Failed to fetch committed offsets for 0 partition(s) in group "g": Broker: Not '
        "coordinator",
    )
    h = Harness([FakeMessage(offset=0), FakeMessage(error=unfetched)])
    h.consumer._assignment.append(TopicPartition("in", 1))
    h.consumer.committed_offsets = {("in", 0): 7}
    h.bridge.run()
    assert h.consumer.assigned == [("in", 0, 7), ("in", 1, OFFSET_BEGINNING)]
    assert h.aborts("offsets_unfetched") == 1
    assert h.metrics.registry.get_sample_value("eos_bridge_input_records_total") == 1  # no event
    assert h.consumer.seeks == []  # assign, not seek: a partition that never fetched refuses it
    other = KafkaError(KafkaError.NOT_COORDINATOR, "Broker: Not coordinator")
    h = Harness([FakeMessage(error=other)])
    h.bridge.run()
    assert h.consumer.assigned == [] and h.aborts("offsets_unfetched") == 0


def test_retriable_commit_error_is_retried_not_aborted() -> None:
    h = Harness()
    h.producers[0].fail["commit_transaction"] = [kafka_exc(KafkaError._TIMED_OUT, retriable=True)]
    h.bridge.run()
    assert h.producers[0].calls.count("commit_transaction") == 2
    assert h.aborts("abortable") == 0 and h.consumer.seeks == []


def test_abortable_error_aborts_rewinds_and_continues() -> None:
    h = Harness()
    h.consumer.committed_offsets = {("in", 0): 0}
    h.producers[0].fail["send_offsets_to_transaction"] = [
        kafka_exc(KafkaError.ILLEGAL_GENERATION, txn_requires_abort=True)
    ]
    h.bridge.run()
    assert h.aborts("abortable") == 1
    assert h.consumer.seeks == [("in", 0, 0)]
    # the next transaction runs under a new epoch: a new producer, initialised
    assert len(h.producers) == 2 and "abort_transaction" in h.producers[0].calls
    assert h.producers[1].calls[0] == "init_transactions" and h.txn.epoch_bumps == 1


def test_fenced_producer_is_recreated_in_process() -> None:
    h = Harness()
    h.consumer.committed_offsets = {("in", 0): 0}
    h.producers[0].fail["commit_transaction"] = [kafka_exc(KafkaError._FENCED, fatal=True)]
    h.bridge.run()
    assert len(h.producers) == 2 and h.aborts("producer_recreated") == 1
    assert h.producers[1].calls[:2] == ["init_transactions", "begin_transaction"]
    assert h.consumer.seeks == [("in", 0, 0)]


@pytest.mark.parametrize(
    "failures",
    [
        {"commit_transaction": [(KafkaError._FENCED, {"fatal": True})]},
        {  # the soak's case: send_offsets times out (abortable), the abort meets a fence
            "send_offsets_to_transaction": [(KafkaError._TIMED_OUT, {"txn_requires_abort": True})],
            "abort_transaction": [(KafkaError._FENCED, {"fatal": True})],
        },
    ],
    ids=["fenced-at-commit", "abortable-then-fenced"],
)
def test_a_replaced_producer_is_released_without_waiting_for_a_garbage_collection(
    failures: dict[str, list[tuple[int, dict[str, bool]]]],
) -> None:
    """The frames of the errors that replaced a producer held it (and an exception sits in a
    cycle with the frame that raised it): it lived, with its librdkafka threads and sockets,
    until a full collection, or for as long as anything kept the error (the 2-hour soak: four
    old producers in one process after 50 minutes). Checked with the collector off and the
    errors kept, while the loop runs."""
    h = Harness()
    h.consumer.committed_offsets = {("in", 0): 0}
    for name, errors in failures.items():
        h.producers[0].fail[name] = [kafka_exc(code, **flags) for code, flags in errors]
    old = weakref.ref(h.producers[0])
    alive: list[bool] = []

    def check() -> None:
        h.producers[:] = [p for p in h.producers if p is not old()]  # the harness's reference
        alive.append(old() is not None)
        h.bridge.stopping = True

    h.consumer.on_empty = check
    # Something keeps the errors (as in the soak, where the holder was never found): the
    # producer must go all the same.
    kept: list[BaseException] = []
    react = h.bridge._ladder.react

    def react_and_keep(exc: BaseException, *, rewind: bool = True) -> None:
        kept.append(exc)
        react(exc, rewind=rewind)

    h.bridge._ladder.react = react_and_keep  # type: ignore[method-assign]
    collecting = gc.isenabled()
    gc.disable()
    try:
        h.bridge.run()
    finally:
        if collecting:
            gc.enable()
    assert len(h.producers) == 1 and h.producers[0].calls[0] == "init_transactions"  # the new one
    assert alive and not any(alive)
    assert kept and str(kept[0])  # the errors themselves are kept, with their messages


def test_a_raw_client_error_is_classified_by_the_ladder() -> None:
    """producer.flush() raises librdkafka's fatal error itself: still a new producer."""
    h = Harness()
    h.producers[0].fail["flush"] = [kafka_exc(KafkaError._FENCED, fatal=True)]
    h.bridge.run()
    assert len(h.producers) == 2 and h.aborts("producer_recreated") == 1


def test_replayed_record_goes_to_the_new_producer() -> None:
    h = Harness()
    h.consumer.committed_offsets = {("in", 0): 0}
    h.producers[0].fail["commit_transaction"] = [kafka_exc(KafkaError._FENCED, fatal=True)]
    h.consumer.batches.append([FakeMessage(offset=0)])  # the replay after the rewind
    h.bridge.run()
    assert [t for t, _v, _k in h.producers[1].produced] == ["out"]
    assert h.producers[1].calls.count("commit_transaction") == 1


def test_a_refused_record_gets_a_fresh_producer_not_counted_as_a_twin() -> None:
    h = Harness()
    refused(h.output, (b"k", b"{}"))  # its delivery report arrives before the checkpoint
    h.bridge.run()
    assert h.aborts("record_refused") == 1 and len(h.producers) == 2
    assert h.txn._recreations == 0  # the bound is about twins, not records


def test_a_failed_commit_replays_with_a_delivery_report_per_record() -> None:
    """A stateful exactly-once producer has no producer-level reports: after a commit fails
    for a delivery, the replay asks for one per record, so a refused record can be named."""
    h = Harness()
    h.producers[0].fail["commit_transaction"] = [
        kafka_exc(KafkaError.INVALID_TIMESTAMP, txn_requires_abort=True)
    ]
    h.consumer.batches.append([FakeMessage(offset=0)])  # the replay after the rewind
    h.bridge.run()
    assert h.aborts("commit_failed") == 1
    # first send plain; the replay, through the new epoch's producer, reported
    assert h.producers[0].reported == [False] and h.producers[1].reported == [True]
    assert not h.output.refusals.diagnosing  # the replay committed cleanly: back to normal


def test_unrepairable_producer_error_ends_the_run() -> None:
    h = Harness()
    h.producers[0].fail["commit_transaction"] = [
        kafka_exc(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal=True)
    ]
    with pytest.raises(KafkaFatalError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        h.bridge.run()


def test_static_member_fenced_by_a_live_twin_names_the_instance_id() -> None:
    fenced = KafkaError(KafkaError._FATAL, "static consumer fenced")  # no fatal flag: real
    h = Harness([FakeMessage(error=fenced)])
    with pytest.raises(InstanceFenced, match=r"instance_id='i0'.*own BRIDGE_INSTANCE_ID"):
        h.bridge.run()


def test_partitions_migrated_aborts_and_rewinds() -> None:
    h = Harness()
    h.state.errors = [PartitionsMigrated("in[0] is not ours any more")]
    h.bridge.run()
    assert h.aborts("partitions_migrated") == 1 and h.consumer.seeks == [("in", 0, -2)]


def test_state_corrupted_wipes_that_partition_and_restores_it() -> None:
    h = Harness()
    h.state.errors = [StateCorrupted("store of in[0] unreadable", [("in", 0)])]
    h.bridge.run()
    assert h.state.wiped == [("in", 0)] and ("in", 0) in h.consumer.paused
    assert h.aborts("state_corrupted") == 1


def test_state_corrupted_without_a_partition_is_fatal() -> None:
    h = Harness()
    h.state.errors = [StateCorrupted("state directory unreadable")]
    with pytest.raises(KafkaFatalError, match="state directory unreadable"):
        h.bridge.run()


def test_fault_injection_is_counted_apart() -> None:
    h = Harness()
    h.state.errors = [CheckpointAborted("injected", "fault_injection")]
    h.bridge.run()
    assert h.aborts("fault_injection") == 1 and h.aborts("abortable") == 0


# ---- a record the broker refuses -----------------------------------------------------------


class ReportedMessage:
    """What librdkafka hands the delivery callback for a produced record."""

    def __init__(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        self._t, self._k, self._v = topic, key, value

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return 0

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes | None:
        return self._v


def refused(output: Output, *records: tuple[bytes, bytes]) -> None:
    """The delivery reports of one refused produce batch of (key, value) records."""
    err = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Broker: Message size too large")
    for key, value in records:
        output.collector.on_delivery(err, ReportedMessage("out", key, value))


def row(key: bytes, value: dict[str, int], offset: int) -> Row:
    return Row(value, key, None, "in", 3, offset, 0, orjson.dumps(value))


def test_a_lone_refused_record_aborts_once_then_goes_to_the_dlq() -> None:
    producer = FakeProducer()
    output = Output(RecordCollector(producer), "out", "dlq", 1_000_000, lambda topic: True)
    big = row(b"k", {"big": 1}, 42)
    assert output.send([big]) == []
    refused(output, (b"k", b'{"big":1}'))
    with pytest.raises(RecordRefused, match=r"MSG_SIZE_TOO_LARGE.*topic out") as raised:
        output.flush(1.0)
    assert raised.value.reason == "record_refused" and output.refusals.pending
    output.reset()  # the abort
    replay = output.send([big])  # the same input, replayed after the rewind
    assert len(replay) == 1 and isinstance(replay[0].error, OutputRefused)
    assert "in[3]@42" in str(replay[0].error) and not output.refusals.pending
    assert producer.produced == [("out", b'{"big":1}', b"k")]  # not sent a second time
    output.flush(1.0)  # nothing latched any more


def test_a_refused_batch_is_replayed_record_by_record_to_find_the_culprit() -> None:
    """The broker refuses the whole produce batch; only the record refused alone is bad."""
    producer = FakeProducer()
    output = Output(RecordCollector(producer), "out", "dlq", 1_000_000, lambda topic: True)
    small, big = row(b"a", {"ok": 1}, 1), row(b"b", {"big": 1}, 2)
    output.send([small, big])
    refused(output, (b"a", b'{"ok":1}'), (b"b", b'{"big":1}'))
    with pytest.raises(RecordRefused):
        output.flush(1.0)
    output.reset()
    assert output.send([small, big]) == []  # both produced alone: suspects, not yet guilty
    assert producer.calls[-6:] == ["flush", "produce", "flush"] * 2
    refused(output, (b"b", b'{"big":1}'))  # refused again, alone
    with pytest.raises(RecordRefused):
        output.flush(1.0)
    output.reset()
    replay = output.send([small, big])
    assert [f.row.offset for f in replay] == [2]  # only the guilty one is dead-lettered
    assert producer.produced[-1] == ("out", b'{"ok":1}', b"a")


def test_a_broker_without_kip848_is_a_settings_error_naming_group_protocol() -> None:
    """What librdkafka 2.16 delivers when the coordinator has no ConsumerGroupHeartbeat (seen on
    a Kafka 4.4 broker with group.coordinator.rebalance.protocols=classic): code _FATAL, which a
    fenced static member also gets; the bridge exits 2 naming the setting, not 5 "fenced"."""
    text = (
        "Fatal error: Broker: API version not supported: ConsumerGroupHeartbeat fatal error: "
        "Broker: API version not supported"
    )
    with pytest.raises(ConfigError, match=r"^group_protocol=consumer \(BRIDGE_GROUP_PROTOCOL\)"):
        consumer_error(KafkaError(KafkaError._FATAL, text), "i0")
    with pytest.raises(InstanceFenced):  # the same code without the API's name: a fence
        consumer_error(KafkaError(KafkaError._FATAL, "Fatal error: Broker: fenced"), "i0")
