"""Checkpoints: when to commit, and the commit itself in its numbered steps."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from app.engine.faults import NO_FAULTS, Faults
from app.engine.transactions import Transactions
from app.errors import BridgeError
from app.kafka.ports import ConsumerPort, Message
from app.ops.metrics import Metrics
from app.sink.output import Output
from app.state.backend import StateBackend

log = logging.getLogger(__name__)

# A checkpoint is due ``interval`` after the previous one *started* (Kafka Streams' rule, so a
# record waits at most about one interval plus one commit, not plus two), but never sooner than
# this fraction of the interval after the previous one *ended* (Flink's minimum pause between
# checkpoints): a commit slower than the interval still leaves the loop time for batches.
MIN_PAUSE_FRACTION = 0.5


@dataclass(slots=True, frozen=True)
class Pending:
    """A checkpoint between :meth:`Checkpoint.prepare` and :meth:`Checkpoint.finish`."""

    started: float  # perf_counter
    positions: dict[tuple[str, int], int]
    moved: list[TopicPartition]


class Checkpoint:
    """Commits every ``interval`` seconds (counted from the previous checkpoint's start, with a
    minimum pause after its end: :data:`MIN_PAUSE_FRACTION`) or ``every`` records (Quix
    Streams' rule), on revoke and on shutdown. A checkpoint with nothing consumed commits
    nothing, with one exception: when the consumer's positions stepped over records it never
    returns (an upstream producer's aborted transaction, transaction markers) with nothing
    consumed after, an offsets-only transaction commits the new positions once an interval, so
    the group's lag ends at 0 instead of waiting for the next record.

    Args:
        max_age: seconds an open transaction may live (a fraction of transaction.timeout.ms):
            the loop bounds every batch by :meth:`time_left`, so no transaction reaches the
            broker's timeout whatever a step does.
        faults: the test rig's seams (:class:`app.engine.faults.Faults`); none by default.
        clock: monotonic seconds (a fake in unit tests).
    """

    def __init__(
        self,
        consumer: ConsumerPort,
        txn: Transactions,
        output: Output,
        state: StateBackend,
        metrics: Metrics,
        interval: float,
        every: int,
        flush_timeout: float,
        max_age: float = 30.0,
        faults: Faults = NO_FAULTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._consumer = consumer
        self._txn = txn
        self._output = output
        self._state = state
        self._metrics = metrics
        self._interval = interval
        self._every = every
        self._flush_timeout = flush_timeout
        self._max_age = max_age
        self._faults = faults
        self._disabled = False
        self._committed: dict[tuple[str, int], int] = {}  # the group's, as last known here
        # The assignment as the rebalance callbacks reported it (None: not reported, ask the
        # consumer): librdkafka's assignment() is a round trip to its main thread.
        self._assigned: dict[tuple[str, int], TopicPartition] | None = None
        self._skipped = False  # positions moved with nothing consumed: commit offsets only
        self._clock = clock
        self._listeners: list[Callable[[int], None]] = []
        self._min_pause = interval * MIN_PAUSE_FRACTION
        self.consumed = 0
        self.started = clock()  # the open transaction's clock (restarted by each checkpoint)
        self._ended = self.started  # when the last checkpoint ended
        self._began = self.started  # when the checkpoint in progress began (prepare)
        self._first_record = self.started
        self._looked = self.started  # the last look for skipped records (nothing consumed)

    def on_commit(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(records)`` after each committed checkpoint (poison isolation)."""
        self._listeners.append(listener)

    def record(self, consumed: int, started: float) -> None:
        """Count ``consumed`` records processed since ``started`` (monotonic)."""
        if self.consumed == 0:
            self._first_record = started
        self.consumed += consumed

    def due(self) -> bool:
        if self._state.needs_checkpoint():
            return True
        if self.consumed == 0:
            return self._skipped_past_committed()
        if self.time_left() < self._max_age / 2:
            return True  # a slow batch used the time: commit before the transaction nears it
        if self._every and self.consumed >= self._every:
            return True
        now = self._clock()
        return now - self.started >= self._interval and now - self._ended >= self._min_pause

    def time_left(self) -> float:
        """Seconds until the open transaction must have been committed."""
        if self.consumed == 0:
            return self._max_age
        return self._first_record + self._max_age - self._clock()

    def commit(self) -> None:
        """Commit everything consumed since the last checkpoint, then open the next one.

        Raises:
            CheckpointAborted: the transaction must be aborted (the caller rewinds).
            ProducerFenced: the producer must be re-created (the caller rewinds).
            KafkaFatalError: the commit outcome is unknown, or nothing in-process can help.
        """
        pending = self.prepare()
        if pending is not None:
            self.send(pending)
            self.finish(pending)

    def prepare(self, ahead: list[Message] | None = None) -> Pending | None:
        """Steps 1 (changelogs) of a checkpoint; None when there is nothing to commit.

        Args:
            ahead: consumed messages that are *not* part of this transaction (the pipelined
                checkpoint's next batch): a partition with one of them commits the first one's
                offset, not the consumer's position past them.
        """
        if self._disabled:
            return None
        if self.consumed == 0 and not self._skipped:
            self._restart_clock()  # empty: the open transaction holds nothing; keep it
            return None
        self._began = self._clock()
        started = time.perf_counter()
        positions = self._positions()
        for m in reversed(ahead or ()):  # reversed: the first message of a partition wins
            if m.error() is None:
                positions[(m.topic() or "", m.partition() or 0)] = m.offset() or 0
        # 1. changelog records for dirty state keys, inside the transaction
        self._state.produce_changelogs(self._output.collector, positions)
        if self.consumed:
            self._faults.before_offsets(self._flush)
        moved = [  # those that moved since the last commit: the others are committed already
            TopicPartition(t, p, o)
            for (t, p), o in positions.items()
            if self._committed.get((t, p)) != o
        ]
        return Pending(started, positions, moved)

    def send(self, pending: Pending) -> None:
        """Steps 2 to 4: input offsets into the transaction while the records are still in flight;
        flush (any delivery error, output or changelog, fails the checkpoint); commit. The one
        part the pipelined checkpoint runs on its helper thread."""
        self._txn.commit(pending.moved, self._settle)

    def finish(self, pending: Pending) -> None:
        """Steps 5 and 6 after a successful :meth:`send`: local state, the next transaction."""
        self._committed.update(pending.positions)
        self._metrics.commit_age.advanced((tp.topic, tp.partition) for tp in pending.moved)
        if self.consumed:
            self._output.checkpoint_committed(self.consumed)  # dead-letter summary + ratio
        # 5. local state: one WriteBatch per partition (dirty keys + changelog offset)
        self._state.after_commit()
        # 6. the next transaction
        self._txn.begin()
        self._metrics.checkpoint_committed(time.perf_counter() - pending.started, self.consumed)
        for listener in self._listeners:
            listener(self.consumed)
        self._restart_clock(began=self._began)

    def _settle(self) -> None:
        self._output.flush(self._flush_timeout)
        self._state.verify_delivery()
        if self.consumed:
            self._faults.after_flush()

    def disable(self) -> None:
        """After a fatal error: never commit again (closing the consumer calls revoke)."""
        self._disabled = True

    def _flush(self) -> None:
        self._output.flush(self._flush_timeout)

    def assigned(self, partitions: list[tuple[str, int]]) -> None:
        """Partitions assigned (the rebalance callback): checkpoints read their positions."""
        if self._assigned is None:
            self._assigned = {}
        for t, p in partitions:
            self._assigned[(t, p)] = TopicPartition(t, p)

    def forget(self, partitions: list[tuple[str, int]]) -> None:
        """Partitions revoked or lost: their committed offsets are another owner's now."""
        for key in partitions:
            self._committed.pop(key, None)
            if self._assigned is not None:
                self._assigned.pop(key, None)

    def abandon(self) -> None:
        """After an abort: forget the count; the caller rewinds to committed offsets."""
        self._restart_clock()

    def _restart_clock(self, began: float | None = None) -> None:
        """A new transaction: the next checkpoint is due an interval after ``began`` (a
        committed checkpoint's start; by default now) and a minimum pause after now."""
        self.consumed = 0
        self._skipped = False
        now = self._clock()
        self._ended = self._looked = now
        self.started = now if began is None else began

    def _skipped_past_committed(self) -> bool:
        """Nothing consumed: once an interval, whether a position passed the group's committed
        offset. Only skipped records can have moved it (the loop counts every record it is
        given, and an abort seeks back to the committed offsets), so committing it loses
        nothing. A partition never committed counts from offset 0."""
        now = self._clock()
        if now - self._looked < self._interval:
            return False
        self._looked = now  # (not ``started``: the first record after a pause commits soon)
        positions = self._positions()
        if not self._look_up_committed(positions):
            return False
        self._skipped = any(
            offset > max(self._committed.get(key, 0), 0) for key, offset in positions.items()
        )
        return self._skipped

    def committed_positions(self) -> dict[tuple[str, int], int]:
        """The committed offset of every assigned partition (-1001: none), as last committed
        here or, for a partition this process never committed, looked up once (the lag gauge
        reads from them: an abort loop keeps its lag)."""
        positions = self._positions()
        self._look_up_committed(positions)
        return {key: self._committed[key] for key in positions if key in self._committed}

    def _look_up_committed(self, positions: dict[tuple[str, int], int]) -> bool:
        """Fill in the committed offsets of ``positions`` not known here; False when the
        coordinator did not answer (asked again next time)."""
        unknown = [TopicPartition(t, p) for t, p in positions if (t, p) not in self._committed]
        if not unknown:
            return True
        try:
            for tp in self._txn.offsets.committed(unknown):
                self._committed[(tp.topic, tp.partition)] = tp.offset
        except BridgeError as exc:  # the coordinator is away: look again next interval
            log.debug("committed offsets unknown, checked next interval: %s", exc)
            return False
        return True

    def _positions(self) -> dict[tuple[str, int], int]:
        """Next offset to read per assigned partition: position(), never last offset + 1
        (positions step over transaction markers)."""
        if self._assigned is None:
            assignment = self._consumer.assignment()
        else:
            assignment = list(self._assigned.values())
        if not assignment:
            return {}
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in self._consumer.position(assignment)
            if tp.offset >= 0
        }
