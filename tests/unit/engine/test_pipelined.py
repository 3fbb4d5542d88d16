"""The pipelined checkpoint (``pipelined_commit``): the state machine over fake clients.

Transaction T commits on a helper thread while the next batch B is transformed; B must reach
the producer only after T committed and T+1 began, never when T failed, and T's offsets must
stop before B.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError

from app.engine.checkpoint import Checkpoint
from app.engine.loop import LoopSettings
from app.engine.pipelined import pipelined_allowed
from app.engine.transactions import Transactions
from app.engine.wiring import assemble
from app.errors import KafkaFatalError
from app.offsets import GroupOffsets
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline.builder import Pipeline
from app.serde import formats
from app.sink.collector import RecordCollector
from app.sink.output import Output
from app.state.backend import NoState, StateBackend
from app.state.store import StorePartition
from tests.unit.engine.test_error_ladder import Harness
from tests.unit.fakes import FakeConsumer, FakeMessage, FakeProducer, idle_watchdog, kafka_exc
from tests.unit.state.test_state_backend import backend, ready


class AdvancingConsumer(FakeConsumer):
    """Positions move past what consume() hands out, as librdkafka's do."""

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        batch = super().consume(num_messages, timeout)
        for m in batch:
            if m.error() is None:
                self.positions[(m.topic(), m.partition())] = m.offset() + 1
        return batch


class Rig(Harness):
    """A bridge with ``pipelined_commit`` on; every checkpoint is due once a record is in (the
    error ladder's harness otherwise: its producers, its stop when the batches run out)."""

    def __init__(
        self,
        batches: list[list[FakeMessage]],
        *,
        pipelined: bool = True,
        state: StateBackend | None = None,
        pipeline: Pipeline | None = None,
    ) -> None:
        state = state or NoState()
        self.producers: list[FakeProducer] = []
        self.consumer = AdvancingConsumer()
        self.consumer.batches = batches
        self.metrics = Metrics()
        watchdog = idle_watchdog()
        self.txn = Transactions(
            self._new_producer, self.consumer, GroupOffsets(self.consumer, watchdog, 5.0),
            exactly_once=True, call_timeout=5.0, watchdog=watchdog,
        )  # fmt: skip
        output = Output(
            RecordCollector(self.txn.producer), "out", "dlq", 1_000_000, lambda topic: True
        )
        self.checkpoint = Checkpoint(
            self.consumer, self.txn, output, state, self.metrics,
            interval=1e-9, every=0, flush_timeout=5.0,
        )  # fmt: skip
        loop = LoopSettings(
            topics=["in"], instance_id="i0", batch_size=10, poll_timeout=0.0, retries=0,
            dead_letter=True, pipelined=pipelined,
        )  # fmt: skip
        self.bridge = assemble(
            self.consumer, self.txn, output, pipeline or Pipeline(), state, self.checkpoint,
            self.metrics, Health(30.0), watchdog, loop, formats(),
        )  # fmt: skip
        self.consumer.on_empty = self._stop

    @property
    def calls(self) -> list[str]:
        return [c for c in self.producers[0].calls if c != "flush"]


def record(offset: int) -> FakeMessage:
    return FakeMessage(offset=offset, value=b'{"n": %d}' % offset)


def test_the_next_batch_is_produced_after_the_commit_and_the_next_begin() -> None:
    rig = Rig([[record(0)], [record(1)]])
    rig.bridge.run()
    assert rig.calls[:8] == [
        "begin_transaction", "produce",  # T: record 0
        "send_offsets_to_transaction", "commit_transaction",  # T, beside record 1's pipeline
        "begin_transaction", "produce",  # T+1: record 1, produced only now
        "send_offsets_to_transaction", "commit_transaction",
    ]  # fmt: skip
    # T's offsets stop before the batch transformed beside it; T+1's cover it
    assert rig.producers[0].sent_offsets == [[("in", 0, 1)], [("in", 0, 2)]]
    assert [value for _, value, _ in rig.producers[0].produced] == [b'{"n": 0}', b'{"n": 1}']
    assert rig.metrics.registry.get_sample_value("eos_bridge_input_records_total") == 2
    assert rig.metrics.registry.get_sample_value("eos_bridge_checkpoints_pipelined_total") == 1


def test_a_failed_commit_drops_the_next_batch_unsent_and_rewinds() -> None:
    rig = Rig([[record(0)], [record(1)]])
    rig.producers[0].fail["commit_transaction"] = [
        kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    ]
    rig.bridge.run()
    calls = rig.calls
    failed = calls.index("commit_transaction")
    assert calls[failed + 1] == "abort_transaction"
    assert "produce" not in calls[failed:]  # record 1 never reached the producer
    assert [value for _, value, _ in rig.producers[0].produced] == [b'{"n": 0}']
    assert ("in", 0, -2) in rig.consumer.seeks  # rewound (no committed offset: the reset)
    assert rig.metrics.registry.get_sample_value("eos_bridge_input_records_total") == 1
    assert rig.metrics.registry.get_sample_value("eos_bridge_checkpoints_pipelined_total") == 0


def test_a_fatal_error_while_transforming_still_finishes_the_committed_checkpoint() -> None:
    forbidden = FakeMessage(error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"))
    rig = Rig([[record(0)], [forbidden]])
    with pytest.raises(KafkaFatalError):
        rig.bridge.run()
    assert rig.calls[-3:] == ["send_offsets_to_transaction", "commit_transaction",
                              "begin_transaction"]  # fmt: skip
    assert rig.checkpoint.consumed == 0  # T's checkpoint was finished


def test_off_by_default_and_where_the_argument_does_not_hold() -> None:
    rig = Rig([[record(0)], [record(1)]], pipelined=False)
    rig.bridge.run()
    assert rig.calls[:4] == [
        "begin_transaction", "produce", "send_offsets_to_transaction", "commit_transaction",
    ]  # fmt: skip
    assert rig.producers[0].sent_offsets[0] == [("in", 0, 1)]  # committed before record 1
    ok = {"wanted": True, "exactly_once": True, "tasks": False, "per_topic": False}
    assert pipelined_allowed(**ok)
    for key in ok:
        assert not pipelined_allowed(**{**ok, key: not ok[key]}), key


def test_prepare_stops_each_partition_at_its_first_message_ahead() -> None:
    rig = Rig([])
    rig.consumer.positions = {("in", 0): 9, ("in", 1): 4}
    rig.checkpoint.assigned([("in", 0), ("in", 1)])
    rig.checkpoint.record(3, started=0.0)
    ahead = [FakeMessage(offset=7), FakeMessage(offset=8), FakeMessage(error=KafkaError(1))]
    pending = rig.checkpoint.prepare(ahead=ahead)
    assert pending is not None
    assert pending.positions == {("in", 0): 7, ("in", 1): 4}


class Delivering(FakeProducer):
    """Serves delivery reports at the flush, with consecutive offsets per partition (the
    changelog writer stores the last one's offset)."""

    def __init__(self) -> None:
        super().__init__()
        self._reports: list[tuple[Any, FakeMessage]] = []
        self._next: dict[tuple[str, int], int] = {}

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                callback: Any = None, on_delivery: Any = None, timestamp: int = 0,
                headers: Any = None) -> None:  # fmt: skip
        super().produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)
        where = (topic, max(partition, 0))
        offset = self._next[where] = self._next.get(where, -1) + 1
        report = callback or on_delivery
        if report is not None:
            self._reports.append((report, FakeMessage(topic, where[1], offset)))

    def flush(self, timeout: float = -1) -> int:
        super().flush(timeout)
        reports, self._reports = self._reports, []
        for report, msg in reports:
            report(None, msg)
        return 0

    def abort_transaction(self, timeout: float = -1) -> None:
        super().abort_transaction(timeout)
        self._reports.clear()  # purged: no report (the writer's next checkpoint starts afresh)


class StatefulRig(Rig):
    """P2's shape: count per key in RocksDB stores with their changelog."""

    def __init__(self, root: Path, batches: list[list[FakeMessage]]) -> None:
        self.state = backend(root)
        ready(self.state, 0)
        super().__init__(batches, state=self.state, pipeline=Pipeline().count())

    def _new_producer(self) -> FakeProducer:
        self.producers.append(Delivering())
        return self.producers[-1]

    def sent(self, topic: str) -> list[Any]:
        return [value for t, value, _ in self.producers[0].produced if t == topic]


def keyed(offset: int, key: bytes = b"a") -> FakeMessage:
    return FakeMessage(offset=offset, key=key)


def test_state_updates_of_the_next_batch_wait_for_the_next_transaction(tmp_path: Path) -> None:
    """T counts a once; B (counted beside T's commit) counts a again and b: T's changelog and
    T's step 5 carry a=1 only, T+1's carry a=2 and b=1."""
    rig = StatefulRig(tmp_path, [[keyed(0)], [keyed(1), keyed(2, b"b")]])
    rig.bridge.run()
    assert rig.calls[:10] == [
        "begin_transaction", "produce", "produce",  # T: output of record 0, changelog a=1
        "send_offsets_to_transaction", "commit_transaction",  # T, beside B's pipeline
        "begin_transaction", "produce", "produce",  # T+1: B's outputs, kept until now
        "produce", "produce",  # T+1's changelog: a=2, b=1
    ]  # fmt: skip
    changelog = [r for r in rig.producers[0].produced if r[0].startswith("changelog")]
    assert [(key, value) for _, value, key in changelog] == [
        (b"ba", b"1"), (b"ba", b"2"), (b"bb", b"1"),  # state keys: b + the bytes key
    ]  # fmt: skip
    assert [orjson.loads(v)["count"] for v in rig.sent("out")] == [1, 2, 1]
    assert rig.producers[0].sent_offsets == [[("in", 0, 1)], [("in", 0, 3)]]
    assert stored(tmp_path, b"ba", b"bb") == ([b"2", b"1"], 2)  # changelog offsets 0, 1, 2


def test_a_failed_commit_drops_the_state_updates_made_beside_it(tmp_path: Path) -> None:
    rig = StatefulRig(tmp_path, [[keyed(0)], [keyed(1)]])
    rig.producers[0].fail["commit_transaction"] = [
        kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    ]
    rig.bridge.run()
    assert len(rig.sent("out")) == 1  # B never produced
    assert stored(tmp_path, b"ba") == ([None], None)  # neither T's count nor B's


def stored(root: Path, *keys: bytes) -> tuple[list[bytes | None], int | None]:
    """What RocksDB holds after the bridge closed its stores, and its changelog offset."""
    store = StorePartition(root / "count" / "in" / "0", "t")
    try:
        return [store.get(k) for k in keys], store.changelog_offset()
    finally:
        store.close()
