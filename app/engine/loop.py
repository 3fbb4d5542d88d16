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
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from app.engine.atomic import Atomic, first_stateful, run_steps
from app.engine.batches import Transformed, by_partition, replay, run_fused
from app.engine.checkpoint import Checkpoint
from app.engine.ladder import Ladder
from app.engine.pipelined import overlap
from app.engine.rebalance import Rebalancer
from app.engine.transactions import Transactions
from app.engine.watchdog import Watchdog
from app.errors import (
    BridgeError,
    DeserializationError,
    InstanceFenced,
    KafkaFatalError,
    OffsetsUnfetched,
    RecordError,
    forget_frames,
)
from app.kafka.errors import (
    Reaction,
    classify_consumer,
    describe,
    offsets_unfetched,
)
from app.kafka.ports import ConsumerPort, Message, TaskRouting
from app.ops.health import Health
from app.ops.lag import LagReport
from app.ops.metrics import Metrics
from app.ops.progress import ProgressLog
from app.pipeline.builder import Pipeline
from app.pipeline.record import Failure, Row
from app.pipeline.steps import StepContext, fuse, reads_value
from app.serde import Formats
from app.serde import formats as default_formats
from app.serde.json import verbatim
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


class Bridge:
    """One bridge process: the consumer, the pipeline, the output and the checkpoint."""

    def __init__(
        self,
        consumer: ConsumerPort,
        txn: Transactions,
        output: Output,
        pipeline: Pipeline,
        state: StateBackend,
        checkpoint: Checkpoint,
        rebalancer: Rebalancer,
        ladder: Ladder,
        metrics: Metrics,
        health: Health,
        watchdog: Watchdog,
        loop: LoopSettings,
        formats: Formats | None = None,
        tasks: TaskRouting | None = None,
    ) -> None:
        self._consumer = consumer
        self._tasks = tasks  # two clusters: one producer per input partition
        self._txn = txn
        self._output = output
        self._pipeline = pipeline
        self._state = state
        self._checkpoint = checkpoint
        self._metrics = metrics
        self._health = health
        self._watchdog = watchdog
        self._topics = loop.topics
        self._instance_id = loop.instance_id
        self._max_batch = self._batch_size = loop.batch_size
        self._poll_timeout = loop.poll_timeout
        self._retries = loop.retries
        self._dead_letter = loop.dead_letter
        formats = formats or default_formats()
        self._decode = _value_decoder(pipeline, formats)
        self._decode_key = None if formats.key_in.name == "bytes" else formats.key_in.decode
        self._rebalancer = rebalancer
        self._ladder = ladder
        # A stateful pipeline's batches: a failed record leaves no trace (app.engine.atomic).
        self._atomic = None
        if first_stateful(pipeline.steps) is not None and self._state_access() is not None:
            self._atomic = Atomic(pipeline.steps, output, self._decode_batch, loop.retries)
        self._progress = ProgressLog(consumer, metrics)
        self._lag = LagReport(consumer, metrics)
        self.stopping = False
        # Pipelines of filters and dict maps, or a count alone, run fused (one pass, no Row
        # objects); a batch with anything unusual falls back to the steps (see
        # app.pipeline.steps.fuse).
        self._fused = None if not loop.fused else fuse(
            pipeline.steps, formats, output.fast_path_max_bytes, output.topic_exists,
            self._state_access(),
        )  # fmt: skip
        self._overlap = overlap(
            checkpoint, wanted=loop.pipelined, exactly_once=txn.exactly_once,
            tasks=tasks is not None, per_topic=output.per_topic,
        )  # fmt: skip

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
            self._process_bounded(messages)
        if self._checkpoint.due():
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
        consume = self._consumer.consume
        messages: list[Message] = consume(self._batch_size, 0)
        if not messages:
            messages = consume(1, self._poll_timeout)
            if messages and self._batch_size > 1:
                messages += consume(self._batch_size - 1, 0)
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
                elapsed, budget, self._batch_size,
            )  # fmt: skip
        elif elapsed < budget / 16 and self._batch_size < self._max_batch:
            self._batch_size = min(self._max_batch, self._batch_size * 2)

    def _process(self, messages: list[Message], deadline: float) -> None:
        self._emit(self._transform(messages, deadline), deadline)

    def _commit_ahead(self) -> bool:
        """The pipelined checkpoint (:mod:`app.engine.pipelined`), when on and the next batch
        is already buffered: the open transaction commits while that batch is transformed into
        memory, then it goes into the next transaction. False: commit the ordinary way."""
        if self._overlap is None or not self._checkpoint.consumed:
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
        rows, failures = self._decode_batch(messages)
        records = len(rows) + len(failures)  # consumer error events are no input records
        phase = self._phases(deadline)
        state = self._state_access()
        if self._atomic is not None and state is not None:
            rows, failed, undo = self._atomic.transform(messages, rows, state, phase)
            return Transformed(kept, calls, records, rows, failures + failed, undo)
        ctx = StepContext(retries=self._retries, state=state)
        rows, _ = run_steps(self._pipeline.steps, rows, ctx, phase, None)
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

    def _decode_batch(self, messages: list[Message]) -> tuple[list[Row], list[Failure]]:
        rows: list[Row] = []
        failures: list[Failure] = []
        decode, decode_key = self._decode, self._decode_key
        for m in messages:
            err = m.error()
            if err is not None:
                self._consumer_error(err)
                continue
            raw = m.value()
            row = Row(
                raw,
                m.key(),
                m.headers(),
                m.topic(),
                m.partition(),
                m.offset(),
                m.timestamp()[1],
                raw,
            )
            try:
                if decode is not None:
                    row.value = decode(raw, row.source_topic)
                if decode_key is not None:
                    row.key = decode_key(row.key, row.source_topic)
            except DeserializationError as exc:
                where = f"{row.source_topic}[{row.partition}]@{row.offset}"
                failures.append(Failure(row, "deserialize", type(exc)(f"{where}: {exc}")))
                continue
            rows.append(row)
        return rows, failures

    def _fail(self, failure: Failure) -> None:
        row = failure.row
        where = f"{row.source_topic}[{row.partition}]@{row.offset}"
        if not self._dead_letter:
            raise RecordError(
                f"record {where} failed in step {failure.step!r}: "
                f"{type(failure.error).__name__}: {failure.error} (on_error=fail)"
            )
        self._output.dead_letter(failure)  # logged once per checkpoint (app.sink.deadletters)

    def _consumer_error(self, err: KafkaError) -> None:
        reaction = classify_consumer(err)
        if reaction is Reaction.INSTANCE_FENCED:
            raise InstanceFenced(
                f"the group coordinator fenced instance_id={self._instance_id!r} "
                f"(group.instance.id): another live instance uses the same id, or, after a "
                f"coordinator failover, this instance's own earlier membership ({describe(err)}). "
                f"If it repeats, give every instance its own BRIDGE_INSTANCE_ID"
            )
        if reaction is Reaction.FATAL:
            raise KafkaFatalError(f"consumer: {describe(err)}")
        if offsets_unfetched(err):  # librdkafka does not retry this one (#5586)
            raise OffsetsUnfetched(f"consumer: {describe(err)}")
        log.warning("consumer error (librdkafka retries): %s", describe(err))

    def _state_access(self) -> StateAccess | None:
        access: StateAccess | None = getattr(self._state, "access", None)
        return access


def _value_decoder(
    pipeline: Pipeline, formats: Formats
) -> Callable[[bytes | None, str], Any] | None:
    """How input values are decoded: not at all when the first step ignores them (count by
    key); checked and kept as they are when there is no step, JSON in and out."""
    if not pipeline.steps:
        checked = verbatim(formats.value_in, formats.value_out)
        if checked is not None:
            return checked
    if reads_value(pipeline.steps) and formats.value_in.structured:
        return formats.value_in.decode
    return None
