"""The processing loop: consume a batch, run the pipeline, produce, checkpoint.

Reads top to bottom: :meth:`Bridge.run` is the loop and the error ladder (every exception
class of :mod:`app.errors` has its one reaction there, as in Kafka Streams'
``StreamThread.runLoop``); each box of the README's architecture drawing is one method below
it. The transaction's life (begin, commit, abort, rewind, new producer) belongs to
:class:`app.engine.transactions.Transactions`; the watchdog bounds every batch and every step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from app.engine.atomic import Atomic, run_steps
from app.engine.batches import Transformed, by_partition, replay, run_fused
from app.engine.checkpoint import Checkpoint
from app.engine.decoding import BatchDecoder
from app.engine.isolation import AFTER_ABORTS, Isolation
from app.engine.ladder import Ladder
from app.engine.pipelined import Overlap
from app.engine.rebalance import Rebalancer
from app.engine.regroup import Regrouper
from app.engine.transactions import Transactions
from app.engine.watchdog import Watchdog
from app.errors import (
    BridgeError,
    RecordError,
    forget_frames,
)
from app.kafka.ports import ConsumerPort, Message, TaskRouting
from app.ops.health import Health
from app.ops.lag import LagReport
from app.ops.metrics import Metrics
from app.ops.progress import ProgressLog
from app.pipeline.errors import error_text
from app.pipeline.fusion import FusedBatch
from app.pipeline.record import Failure
from app.pipeline.steps import Step, StepContext
from app.sink.output import Output
from app.state.access import StateAccess
from app.state.backend import StateBackend

log = logging.getLogger(__name__)

_TXN_DEADLINE = "the open transaction would reach transaction.timeout.ms"
_CLOSE_DEADLINE_S = 60.0
_AHEAD_BATCHES = 4  # pipelined_commit: batches transformed beside one commit, at most


@dataclass(slots=True, frozen=True)
class LoopSettings:
    """What the loop itself reads of the settings."""

    topics: list[str]
    instance_id: str
    batch_size: int
    poll_timeout: float
    retries: int
    dead_letter: bool
    fused: bool = True  # off for a replay: its rows' headers are rewritten by the sink
    pipelined: bool = False  # pipelined_commit (app.engine.pipelined)
    isolate_after: int = AFTER_ABORTS  # aborts in a row that start poison isolation
    incremental: bool = False  # group_protocol=consumer (KIP-848): incremental rebalancing


@dataclass(slots=True, frozen=True)
class Collaborators:
    """What the loop drives, built by the composition (:mod:`app.engine.wiring`)."""

    consumer: ConsumerPort
    txn: Transactions
    output: Output
    state: StateBackend
    checkpoint: Checkpoint
    rebalancer: Rebalancer
    ladder: Ladder
    isolation: Isolation
    metrics: Metrics
    health: Health
    watchdog: Watchdog
    progress: ProgressLog
    lag: LagReport  # from committed positions: an abort loop keeps its lag (and fails /livez)


@dataclass(slots=True, frozen=True)
class Processing:
    """The pipeline as the loop runs it, compiled by the composition.

    Attributes:
        decode: messages → rows and decoding failures.
        steps: what runs on the decoded rows (a regrouped pipeline's tail; its head runs
            before the hop).
        atomic: a stateful pipeline's batches, where a failed record leaves no trace
            (:mod:`app.engine.atomic`).
        fused: the one-pass loop of filters and dict maps or a count alone (``steps.fuse``);
            a batch with anything unusual falls back to the steps.
        overlap: the pipelined checkpoint (:mod:`app.engine.pipelined`), when on.
        regroup: the repartition hop (:mod:`app.engine.regroup`), None: no hop.
        tasks: two clusters: one producer per input partition.
    """

    decode: BatchDecoder
    steps: Sequence[Step]
    atomic: Atomic | None = None
    fused: FusedBatch | None = None
    overlap: Overlap | None = None
    regroup: Regrouper | None = None
    tasks: TaskRouting | None = None


class Bridge:
    """One bridge process: the consumer, the pipeline, the output and the checkpoint."""

    def __init__(self, parts: Collaborators, processing: Processing, loop: LoopSettings) -> None:
        self._consumer = parts.consumer
        self._txn = parts.txn
        self._output = parts.output
        self._state = parts.state
        self._checkpoint = parts.checkpoint
        self._rebalancer = parts.rebalancer
        self._ladder = parts.ladder
        self._isolation = parts.isolation
        self._metrics = parts.metrics
        self._health = parts.health
        self._watchdog = parts.watchdog
        self._progress = parts.progress
        self._lag = parts.lag
        self._decode_batch = processing.decode
        self._steps = processing.steps
        self._atomic = processing.atomic
        self._fused = processing.fused
        self._overlap = processing.overlap
        self._regroup = processing.regroup
        self._tasks = processing.tasks
        self._topics = loop.topics
        self._instance_id = loop.instance_id
        self._max_batch = self._batch_size = loop.batch_size
        self._poll_timeout = loop.poll_timeout
        self._retries = loop.retries
        self._dead_letter = loop.dead_letter
        self.stopping = False

    @property
    def transactions(self) -> Transactions:
        """The transaction owner (its ``init`` runs at start, after the composition)."""
        return self._txn

    def close_state(self) -> None:
        """Close the state backend (and its directory's lock) of a bridge that never ran."""
        self._state.close()

    # ---- the loop and its error ladder -----------------------------------------------------

    def run(self) -> None:
        """Process until :attr:`stopping`; then a final checkpoint.

        Raises:
            KafkaFatalError: nothing in-process can help (exit 3); InstanceFenced (exit 5).
            RecordError: a record failed with ``on_error=fail`` (exit 4).
        """
        self._txn.begin()
        self._consumer.subscribe(self._topics, **self._rebalancer.callbacks())
        while not self.stopping:
            self._health.beat()
            try:
                self._run_once()
            except (BridgeError, KafkaException) as exc:
                self._ladder.react(exc)
                forget_frames(exc)  # dealt with: what its frames held may go now
        self.shutdown()

    def _run_once(self) -> None:
        if self._state.pending_recovery():
            self._rebalancer.recover(budget_s=1.0)
        messages = self._next_batch()
        self._rebalancer.raise_pending()
        if messages:
            self._health.consumed()
            self._process_bounded(messages)
        if self._checkpoint.due() or self._isolation.active:  # isolating: one batch per txn
            if not self._commit_ahead():
                self._checkpoint.commit()
            self._lag.after_checkpoint()  # at the committed positions, at most once a second
        else:
            self._lag.maybe_update()  # between checkpoints, every few seconds
        self._progress.maybe_log()

    def shutdown(self) -> None:
        """Final checkpoint, then leave the group (its revoke callback has nothing to do)."""
        log.info("shutting down: final checkpoint")
        try:
            self._checkpoint.commit()
        except (BridgeError, KafkaException) as exc:
            self._ladder.react_at_close(exc)
        self._txn.abort_quietly()  # the empty transaction opened by the last checkpoint
        self._close_consumer()
        self._state.close()

    def _next_batch(self) -> list[Message]:
        """What is buffered now, up to batch_size; wait up to poll_timeout only when nothing
        is (waiting for a full batch would add latency under light traffic)."""
        consume, size = self._consumer.consume, self._isolation.size(self._batch_size)
        messages: list[Message] = consume(size, 0)
        if not messages:
            messages = consume(1, self._poll_timeout)
            if messages and size > 1:
                messages += consume(size - 1, 0)
        return messages

    def close_after_failure(self) -> None:
        """A fatal or record error: commit nothing more, abort what can be aborted, leave."""
        self._checkpoint.disable()
        self._txn.abort_quietly()
        self._close_consumer()
        self._state.close()

    def _close_consumer(self) -> None:
        """Leave the group; librdkafka's close can block when the coordinator is gone."""
        with self._watchdog.guard("consumer.close", _CLOSE_DEADLINE_S, "group coordinator"):
            self._consumer.close()

    # ---- one batch -------------------------------------------------------------------------

    def _process_bounded(self, messages: list[Message]) -> None:
        """Process one batch within what is left of the open transaction's life.

        Each phase runs under the watchdog (a hang is reported by name and ends the process
        before the broker's transaction timeout would); a batch that used more than a quarter
        of the budget halves the next one, so a slow step leads to smaller transactions, not
        to a timed-out one (Kafka Streams adapts its batch the same way).
        """
        started = time.monotonic()
        budget = self._checkpoint.time_left()
        if self._tasks is None and not self._output.per_topic:
            self._process(messages, started + budget)
        else:  # each partition's records through its task's producer, to its topic's output
            for (_, partition), group in by_partition(messages).items():
                if self._tasks is not None:
                    self._tasks.select(partition)
                self._process(group, started + budget)
        self._checkpoint.record(len(messages), started)
        elapsed = time.monotonic() - started
        if elapsed > budget / 4 and self._batch_size > 1:
            self._batch_size = max(1, self._batch_size // 2)
            log.warning(
                "a batch took %.1fs of the transaction's %.0fs: batch size now %d",
                elapsed,
                budget,
                self._batch_size,
            )
        elif elapsed < budget / 16 and self._batch_size < self._max_batch:
            self._batch_size = min(self._max_batch, self._batch_size * 2)

    def _process(self, messages: list[Message], deadline: float) -> None:
        messages, letters = self._isolation.screen(messages)  # blamed records: dead letters
        for failure in letters:
            self._fail(failure)
        self._emit(self._transform(messages, deadline), deadline)

    def _commit_ahead(self) -> bool:
        """The pipelined checkpoint (:mod:`app.engine.pipelined`), when on and the next batch
        is already buffered: the open transaction commits while that batch is transformed into
        memory, then it goes into the next transaction. False: commit the ordinary way."""
        if self._overlap is None or self._isolation.active or not self._checkpoint.consumed:
            return False
        # What is buffered, up to a few batches: one batch's pipeline (~10 ms at 2000 records)
        # is shorter than a commit's round trips (~20 ms measured), so more of it can overlap.
        want = self._batch_size * _AHEAD_BATCHES
        messages: list[Message] = self._consumer.consume(want, 0)  # no wait
        self._rebalancer.raise_pending()
        if not messages:
            return False
        started = time.monotonic()
        deadline = started + self._checkpoint.time_left()
        calls: list[tuple[Any, ...]] = []
        done = self._overlap.run(
            messages,
            lambda: self._transform(messages, deadline, calls),
            lambda t: self._emit(t, deadline),
        )
        if not done:  # a rebalance callback in that consume() committed already
            self._process_bounded(messages)
            return False
        self._checkpoint.record(len(messages), started)
        self._metrics.checkpoints_pipelined.inc()
        return True

    def _transform(
        self, messages: list[Message], deadline: float, calls: list[tuple[Any, ...]] | None = None
    ) -> Transformed:
        """Decode and run the steps; with ``calls``, the fused loop's produce calls are kept
        there instead of made (the pipelined checkpoint)."""
        kept = 0  # fused records whose produce calls were kept
        if self._fused is not None and not self._output.refusals.pending:
            with self._phase("the fused pipeline", deadline):
                done = run_fused(self._output, self._fused, messages, calls)
            if calls is None:  # produced: counted now (the general path below may raise)
                self._metrics.records_in.inc(done)
            else:
                kept = done
            if done == len(messages):
                return Transformed(kept, calls)
            messages = messages[done:]  # from the record that needs the general path on
        hop: list[Message] = []  # the repartition topic's records, for the tail
        if self._regroup is not None:
            messages, hop = self._regroup.split(messages)
        rows, failures = self._decode_batch(messages)
        records = len(rows) + len(failures)  # consumer error events are no input records
        phase, state, regroup = self._phases(deadline), self._state_access(), self._regroup
        if regroup is not None:  # the head now, forwarded to the hop; the tail below
            head = StepContext(retries=self._retries, state=state)
            forward, _ = run_steps(regroup.plan.head, rows, head, phase, None)
            regroup.forward(forward, head)
            failures += head.failures
            rows, _ = regroup.decode(hop)
            messages = hop
        if self._atomic is not None and state is not None:
            rows, failed, undo = self._atomic.transform(messages, rows, state, phase)
            return Transformed(kept, calls, records, rows, failures + failed, undo)
        ctx = StepContext(retries=self._retries, state=state)
        rows, _ = run_steps(self._steps, rows, ctx, phase, None)
        if regroup is not None:
            regroup.restore(rows, ctx.failures)
        return Transformed(kept, calls, records, rows, failures + ctx.failures)

    def _emit(self, t: Transformed, deadline: float) -> None:
        """Produce what :meth:`_transform` made; dead-letter (or fail on) its failures."""
        if t.calls:
            replay(self._output, t.calls)
        self._metrics.records_in.inc(t.fused)
        if t.rows is None:
            return
        if t.undo is not None and self._atomic is not None:
            failures = self._atomic.emit(t.rows, t.failures, t.undo, self._phases(deadline))
        else:
            with self._phase("output", deadline):
                failures = t.failures + self._output.send(t.rows)
        for failure in failures:
            self._fail(failure)
        self._metrics.records_in.inc(t.records)

    def _phase(self, what: str, deadline: float) -> AbstractContextManager[None]:
        return self._watchdog.guard(what, deadline - time.monotonic(), "", _TXN_DEADLINE)

    def _phases(self, deadline: float) -> Callable[[str], AbstractContextManager[None]]:
        return lambda what: self._phase(what, deadline)

    def _fail(self, failure: Failure) -> None:
        row = failure.row
        where = f"{row.source_topic}[{row.partition}]@{row.offset}"
        if not self._dead_letter:
            raise RecordError(
                f"record {where} failed in step {failure.step!r}: "
                f"{type(failure.error).__name__}: {error_text(failure.error)} (on_error=fail)"
            )
        self._output.dead_letter(failure)  # logged once per checkpoint (app.sink.deadletters)

    def _state_access(self) -> StateAccess | None:
        access: StateAccess | None = getattr(self._state, "access", None)
        return access
