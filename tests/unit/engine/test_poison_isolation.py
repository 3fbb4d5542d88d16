"""Poison isolation and health that tells the truth (issue 52, scope 1 and 2, acceptance 3).

A scripted abort loop over fakes: the consumer hands out its records from the position and a
rewind seeks back to the committed offset (none: the beginning), as librdkafka does; the
error that aborts every checkpoint is one no rung of the ladder knows (``_STATE``-like, a
plain ``CheckpointAborted``). The loop must narrow the batches down to the record, dead-letter
it, and meanwhile ``/livez`` fail and the lag gauge stay above 0.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from app.engine.checkpoint import Checkpoint
from app.engine.isolation import AFTER_ABORTS, Isolation
from app.engine.loop import LoopSettings
from app.engine.transactions import Transactions
from app.engine.wiring import assemble
from app.errors import CheckpointAborted, KafkaFatalError
from app.offsets import GroupOffsets
from app.ops.health import Health
from app.ops.lag import LagReport
from app.ops.metrics import Metrics
from app.pipeline.builder import Pipeline
from app.pipeline.record import Row
from app.pipeline.steps import StepContext
from app.serde import formats
from app.sink.collector import RecordCollector
from app.sink.output import Output
from app.state.backend import NoState
from tests.unit.fakes import FakeConsumer, FakeMessage, FakeProducer, idle_watchdog

RECORDS = 10
BATCH = 10


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ReplayingConsumer(FakeConsumer):
    """``RECORDS`` records at in[0]@0..; consume() hands out from the position (each call
    takes ``step`` seconds of the clock), seek() moves it; the high watermark is the end."""

    def __init__(self, clock: Clock, step: float = 10.0) -> None:
        super().__init__()
        self.clock, self.step = clock, step
        self.positions = {("in", 0): 0}

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        self.clock.now += self.step
        self.calls_made = getattr(self, "calls_made", 0) + 1
        if self.calls_made > 500:  # the old code's endless abort loop: fail, do not hang
            raise AssertionError("still aborting after 500 batches")
        at = self.positions[("in", 0)]
        if at >= RECORDS:
            if self.on_empty is not None:
                self.on_empty()
            return []
        end = min(RECORDS, at + num_messages)
        self.positions[("in", 0)] = end
        return [FakeMessage(offset=o, value=b'{"n": %d}' % o) for o in range(at, end)]

    def seek(self, partition: TopicPartition) -> None:
        super().seek(partition)
        self.positions[(partition.topic, partition.partition)] = max(partition.offset, 0)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return (0, RECORDS)


class Poisoned(NoState):
    """Aborts every checkpoint whose transaction holds output of one of ``poison``'s offsets
    (all checkpoints when ``poison`` is None), with an error the ladder maps to nothing but
    an abort."""

    def __init__(self, poison: set[int] | None) -> None:
        self.poison, self.seen = poison, set[int]()

    def produce_changelogs(self, sink: Any, positions: dict[tuple[str, int], int]) -> None:
        hit = self.poison is None or bool(self.seen & self.poison)
        self.seen.clear()
        if hit:
            raise CheckpointAborted("changelog produce failed: _STATE: Erroneous state")

    def discard(self) -> None:
        self.seen.clear()


class See:
    """A step that tells the state which offsets reached the output."""

    name, stateful = "see", False

    def __init__(self, state: Poisoned) -> None:
        self.state = state

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        self.state.seen.update(r.offset for r in rows)
        return rows


class Rig:
    """The loop over fakes, as the composition builds it, with a fake clock for /livez."""

    def __init__(self, poison: set[int] | None) -> None:
        self.clock = Clock()
        self.consumer = ReplayingConsumer(self.clock)
        self.producers: list[FakeProducer] = []
        self.metrics = Metrics()
        self.state = Poisoned(poison)
        watchdog = idle_watchdog()
        self.txn = Transactions(
            self._new_producer, self.consumer, GroupOffsets(self.consumer, watchdog, 5.0),
            exactly_once=True, call_timeout=5.0, watchdog=watchdog,
        )  # fmt: skip
        output = Output(RecordCollector(self.txn.producer), "out", "dlq", 1_000_000, lambda t: True)
        self.checkpoint = Checkpoint(
            self.consumer, self.txn, output, self.state, self.metrics,
            interval=60.0, every=1, flush_timeout=5.0, clock=self.clock,
        )  # fmt: skip
        self.health = Health(30.0, commit_bound=45.0, clock=self.clock)
        loop = LoopSettings(
            topics=["in"], instance_id="i0", batch_size=BATCH, poll_timeout=0.0, retries=0,
            dead_letter=True,
        )  # fmt: skip
        self.bridge = assemble(
            self.consumer, self.txn, output, Pipeline().then(See(self.state)), self.state,
            self.checkpoint, self.metrics, self.health, watchdog, loop, formats(),
        )  # fmt: skip
        self.consumer.on_empty = self._stop
        # what /livez and the lag gauge say at each abort (the records consumed, not committed)
        self.lag = LagReport(
            self.consumer, self.metrics, committed=self.checkpoint.committed_positions,
            waiting=self.health.waiting,
        )  # fmt: skip
        self.position_lag = LagReport(self.consumer, Metrics())  # the old gauge: positions
        self.seen_at_abort: list[tuple[bool, float, float]] = []
        self.txn.on_abort(self._look)

    def _look(self) -> None:
        self.lag.update()
        self.position_lag.update()
        gauge = self.metrics.lag.labels("in", "0")._value.get()
        old = self.position_lag._metrics.lag.labels("in", "0")._value.get()
        self.seen_at_abort.append((self.health.alive(), gauge, old))

    def _new_producer(self) -> FakeProducer:
        self.producers.append(FakeProducer())
        return self.producers[-1]

    def _stop(self) -> None:
        self.bridge.stopping = True

    def aborts(self) -> int:
        return sum(p.calls.count("abort_transaction") for p in self.producers)

    def dead_letters(self) -> list[tuple[Any, Any]]:
        return [(v, k) for p in self.producers for t, v, k in p.produced if t == "dlq"]


def test_a_record_whose_output_cannot_be_committed_is_isolated_and_dead_lettered() -> None:
    rig = Rig(poison={3})
    rig.bridge.run()
    letters = rig.dead_letters()
    assert len(letters) == 1, letters  # every aborted attempt came before the dead letter
    assert rig.consumer.positions[("in", 0)] == RECORDS
    bound = Isolation(AFTER_ABORTS, BATCH).bound()
    assert AFTER_ABORTS <= rig.aborts() <= bound
    assert not rig.bridge._isolation.active  # back to normal batches


def test_an_endless_abort_loop_ends_in_exit_3_naming_the_record_and_fails_livez() -> None:
    """Every checkpoint aborts, the dead letters too: a bounded number of aborts, then one
    KafkaFatalError naming in[0]@0; meanwhile /livez fails once no checkpoint committed for
    longer than its bound, and the lag gauge (committed positions) stays at RECORDS, where
    the position-based gauge of the old code read 0."""
    rig = Rig(poison=None)
    with pytest.raises(KafkaFatalError, match=r"record in\[0\]@0: neither its output nor"):
        rig.bridge.run()
    assert rig.aborts() <= Isolation(AFTER_ABORTS, BATCH).bound()
    alive = [a for a, _, _ in rig.seen_at_abort]
    assert alive[0] and not alive[-1]  # alive at first, dead once the bound (45 s) passed
    assert all(gauge == RECORDS for _, gauge, _ in rig.seen_at_abort)
    assert rig.seen_at_abort[0][2] == 0  # the old gauge, from positions: "all is well"
    ok, why = rig.health.liveness()
    assert not ok and "no checkpoint committed" in why


def test_isolation_narrows_by_halves_then_blames_one_record_and_returns_to_normal() -> None:
    iso = Isolation(after_aborts=2, batch_size=8)
    err = CheckpointAborted("x")
    for _ in range(2):
        iso.aborted(err)
    assert iso.active and iso.size(8) == 4
    batch = [FakeMessage(offset=o) for o in range(4)]
    assert iso.screen(batch) == (batch, [])
    iso.aborted(err)  # 4 → 2
    iso.screen(batch[:2])
    iso.aborted(err)  # 2 → 1
    assert iso.size(8) == 1
    iso.screen(batch[:1])
    iso.committed(1)  # offset 0 was fine
    iso.screen(batch[1:2])
    iso.aborted(err)  # offset 1 alone aborts: a second try (the abort before may be the cause)
    assert iso.screen(batch[1:2]) == (batch[1:2], [])
    iso.aborted(err)  # alone again: blamed
    rest, letters = iso.screen(batch[1:2])
    assert rest == [] and [f.row.offset for f in letters] == [1]
    assert type(letters[0].error).__name__ == "OutputRefused" and letters[0].row.raw == b"{}"
    iso.aborted(err)  # its full dead letter is refused too: the smallest form, keyed
    _, letters = iso.screen(batch[1:2])
    assert letters[0].row.raw is None and letters[0].row.key == b"in[0]@1"
    iso.committed(1)
    assert not iso.active and iso.size(8) == 8


def test_livez_fails_only_for_consumed_input_with_lag_and_no_commit() -> None:
    """Idle (no lag), restoring (lag, nothing consumed) and committing bridges stay alive."""
    clock = Clock()
    health = Health(30.0, commit_bound=60.0, clock=clock)
    health.waiting(500)  # lag, but nothing consumed: restoring or paused
    clock.now += 120
    health.beat()
    assert health.alive()
    health.consumed()
    clock.now += 50
    health.beat()
    assert health.alive()  # within the bound
    clock.now += 20
    health.beat()
    assert health.liveness() == (False, "no checkpoint committed for 70s while input waits")
    health.waiting(0)  # caught up (an idle bridge commits nothing)
    assert health.alive()
    health.waiting(500)
    health.committed(10)
    assert health.alive()


def test_the_exit_line_is_one_short_line() -> None:
    iso = Isolation(after_aborts=1, batch_size=1)
    iso.aborted(CheckpointAborted("x"))
    iso.screen([FakeMessage(offset=7)])
    error = CheckpointAborted("first line\nsecond " + "y" * 1000)
    for _ in range(3):
        iso.aborted(error)
        iso.screen([FakeMessage(offset=7)])
    with pytest.raises(KafkaFatalError) as raised:
        iso.aborted(error)
    line = str(raised.value)
    assert "\n" not in line and len(line) < 500 and line.startswith("record in[0]@7: ")
