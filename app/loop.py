"""The processing loop: consume a batch, run the pipeline, produce, checkpoint.

Reads top to bottom: :meth:`Bridge.run` is the loop, each box of the DESIGN data flow is one
method below it, and every error is handled in exactly one place (:meth:`Bridge._abort`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from app.checkpoint import Checkpoint
from app.errors import CheckpointAborted, DeserializationError, KafkaFatalError, RecordError
from app.health import Health
from app.kafka.errors import describe
from app.metrics import Metrics
from app.output import Output
from app.pipeline.builder import Pipeline
from app.pipeline.record import Row
from app.pipeline.steps import Failure, StepContext, fuse
from app.rebalance import Rebalancer
from app.state.backend import StateBackend
from app.transactions import Transactions

log = logging.getLogger(__name__)


class Bridge:
    """One bridge process: the consumer, the pipeline, the output and the checkpoint."""

    def __init__(
        self,
        consumer: Any,
        txn: Transactions,
        output: Output,
        pipeline: Pipeline,
        state: StateBackend,
        checkpoint: Checkpoint,
        metrics: Metrics,
        health: Health,
        *,
        topics: list[str],
        batch_size: int,
        poll_timeout: float,
        retries: int,
        dead_letter: bool,
        decode_json: bool,
        start_from_end: bool,
    ) -> None:
        self._consumer = consumer
        self._txn = txn
        self._output = output
        self._pipeline = pipeline
        self._state = state
        self._checkpoint = checkpoint
        self._metrics = metrics
        self._health = health
        self._topics = topics
        self._batch_size = batch_size
        self._poll_timeout = poll_timeout
        self._retries = retries
        self._dead_letter = dead_letter
        self._decode = orjson.loads if decode_json else None
        self._reset_offset = OFFSET_END if start_from_end else OFFSET_BEGINNING
        self._rebalancer = Rebalancer(consumer, checkpoint, state, metrics, health, self._abort)
        self._progress = ProgressLog(consumer, metrics)
        self.stopping = False
        # Pipelines of filters and dict maps run fused (one pass, no Row objects); a batch
        # with anything unusual falls back to the steps (see app.pipeline.steps.fuse).
        self._fused = fuse(pipeline.steps, decode_json, output.fast_path_max_bytes)

    # ---- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        """Process until :attr:`stopping`; then a final checkpoint. Raises on fatal errors."""
        self._txn.begin()
        self._consumer.subscribe(self._topics, **self._rebalancer.callbacks())
        while not self.stopping:
            self._health.beat()
            if self._state.pending_recovery():
                self._rebalancer.recover(budget_s=1.0)
            messages = self._next_batch()
            self._rebalancer.raise_pending()
            try:
                if messages:
                    self._process(messages)
                if self._checkpoint.due():
                    self._checkpoint.commit()
            except CheckpointAborted as exc:
                self._abort(str(exc))
            self._progress.maybe_log()
        self.shutdown()

    def shutdown(self) -> None:
        """Final checkpoint, then leave the group (its revoke callback has nothing to do)."""
        log.info("shutting down: final checkpoint")
        try:
            self._checkpoint.commit()
        except CheckpointAborted as exc:
            self._abort(str(exc), rewind=False)
        self._txn.abort()  # the empty transaction opened by the last checkpoint
        self._consumer.close()
        self._state.close()

    def _next_batch(self) -> list[Any]:
        """What is buffered now, up to batch_size; wait up to poll_timeout only when nothing
        is (waiting for a full batch would add latency under light traffic)."""
        consume = self._consumer.consume
        messages: list[Any] = consume(self._batch_size, 0)
        if not messages:
            messages = consume(1, self._poll_timeout)
            if messages and self._batch_size > 1:
                messages += consume(self._batch_size - 1, 0)
        return messages

    def close_after_failure(self) -> None:
        """A fatal or record error: commit nothing more, abort what can be aborted, leave."""
        self._checkpoint.disable()
        try:
            self._txn.abort()
        except Exception as exc:  # fenced/fatal producers cannot abort; the broker will
            log.warning("abort on failure: %s", describe(exc))
        self._consumer.close()
        self._state.close()

    # ---- one batch -------------------------------------------------------------------------

    def _process(self, messages: list[Any]) -> None:
        if self._fused is not None:
            encoded = self._fused(messages)
            if encoded is not None:
                self._output.send_encoded(encoded)
                self._checkpoint.record(len(messages))
                self._metrics.records_in.inc(len(messages))
                self._metrics.records_out.inc(len(encoded))
                return
        rows, failures = self._decode_batch(messages)
        ctx = StepContext(retries=self._retries, state=self._state_access())
        for step in self._pipeline.steps:
            if not rows:
                break
            rows = step(rows, ctx)
        unsent = self._output.send(rows)
        for failure in failures + ctx.failures + unsent:
            self._fail(failure)
        self._checkpoint.record(len(messages))
        self._metrics.records_in.inc(len(messages))
        self._metrics.records_out.inc(len(rows) - len(unsent))

    def _decode_batch(self, messages: list[Any]) -> tuple[list[Row], list[Failure]]:
        rows: list[Row] = []
        failures: list[Failure] = []
        decode = self._decode
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
            if decode is not None:
                try:
                    row.value = decode(raw)
                except (orjson.JSONDecodeError, TypeError) as exc:
                    error = DeserializationError(
                        f"{row.source_topic}[{row.partition}]@{row.offset}: not JSON: {exc}"
                    )
                    failures.append(Failure(row, "deserialize", error))
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
        self._output.dead_letter(failure)  # logged once per checkpoint (app.deadletters)
        self._metrics.dead_lettered.inc()

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal() or err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise KafkaFatalError(f"consumer: {describe(err)}")
        log.warning("consumer error (librdkafka retries): %s", describe(err))

    def _state_access(self) -> Any:
        return getattr(self._state, "access", None)

    # ---- errors ----------------------------------------------------------------------------

    def _abort(self, reason: str, rewind: bool = True) -> None:
        """Abortable failure: abort, drop uncommitted state, rewind to committed offsets."""
        log.warning("aborting transaction: %s", reason)
        self._metrics.aborts.labels(_reason_label(reason)).inc()
        self._txn.abort()
        self._state.discard()
        self._output.reset()
        self._checkpoint.abandon()
        if rewind:
            self._rewind()
        self._txn.begin()

    def _rewind(self) -> None:
        """Seek every assigned partition back to its committed offset (none → reset policy)."""
        assignment = self._consumer.assignment()
        if not assignment:
            return
        committed = self._consumer.committed(assignment, timeout=30)
        targets = [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else self._reset_offset
            )
            for tp in committed
        ]
        deadline = time.monotonic() + 30
        while True:
            try:
                # All partitions in one pass, again after any failure: a message fetched in
                # between would otherwise move a rewound partition past it.
                for target in targets:
                    self._consumer.seek(target)
                return
            except Exception as exc:  # partition not fetching yet: serve the client, retry
                if time.monotonic() > deadline:
                    raise KafkaFatalError(f"cannot rewind to {targets}: {describe(exc)}") from exc
                self._consumer.consume(1, 0.05)


class ProgressLog:
    """One INFO line every ``every`` seconds: what an operator reads first in a stuck pod."""

    def __init__(self, consumer: Any, metrics: Metrics, every: float = 30.0) -> None:
        self._consumer = consumer
        self._metrics = metrics
        self._every = every
        self._next = time.monotonic() + every

    def maybe_log(self) -> None:
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._every
        sample = self._metrics.registry.get_sample_value
        counts = [
            int(sample(f"eos_bridge_{name}_total") or 0)
            for name in ("records_in", "records_out", "records_dead_lettered", "checkpoints")
        ]
        log.info(
            "progress: %d in, %d out, %d dead-lettered, %d checkpoints, %d partitions assigned",
            *counts,
            len(self._consumer.assignment()),
        )


def _reason_label(reason: str) -> str:
    if reason.startswith("fault injection"):
        return "fault_injection"
    if "delivery" in reason:
        return "delivery"
    return "abortable"
