"""One transactional producer per input partition: fencing without KIP-447 (two clusters).

Kafka Streams' original exactly-once ("EOS-alpha": a ``StreamsProducer`` per task) and
Flink's KafkaSink (a transactional id per subtask). Task ``n`` = input partition number ``n``
(co-partitioned input topics share it; changelog partition ``n`` belongs to it); its producer's
transactional id is stable per group and task, so the instance that is assigned the task
calls ``init_transactions`` on it *before* reading the task's committed positions: that
aborts a paused predecessor's open transaction and bumps the epoch, so the predecessor can
never commit again (docs/cross-cluster.md has the proof sketch and the cost).

:class:`TaskProducers` is the one producer the engine sees (a :class:`ProducerPort`): the
loop selects the task before it runs each partition's records, the writer of changelog
records and positions selects the task of their partition, and a commit commits every task
whose transaction is open.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from app.errors import KafkaFatalError
from app.kafka.errors import RETRY_PAUSE_S, Reaction, classify, describe
from app.kafka.ports import CallGuard, ProducerPort, positions_text
from app.offsets import OffsetStore

log = logging.getLogger(__name__)

_GRACE_S = 15.0  # the watchdog's margin over ``timeout`` when no ``stuck_after`` is given


def task_id_prefix(transactional_id_prefix: str | None, group_id: str) -> str:
    """What the task ids of two clusters start with: the group, after the prefix when set."""
    return f"{transactional_id_prefix}-{group_id}" if transactional_id_prefix else group_id


def task_transactional_id(prefix: str, task: int) -> str:
    """The transactional id of task ``task`` (``prefix`` names the group)."""
    return f"{prefix}-task-{task}"


class TaskProducers:
    """A :class:`ProducerPort` over one transactional producer per assigned task.

    Args:
        new_producer: makes a producer with the given transactional id.
        id_of: the transactional id of a task.
        guard: bounds each blocking call (the watchdog).
        timeout: librdkafka timeout of ``init_transactions``, commit and abort; a retriable
            error of ``init_transactions`` is retried until it has passed.
        stuck_after: the watchdog's deadline per call (the bridge's ``stuck_call_timeout``,
            :func:`app.engine.stores.stuck_after`); default ``timeout`` + 15 s.
        new_epoch_per_abort: each aborted task's producer is replaced by a new, initialised one,
            so its next transaction runs under a new epoch (as
            :meth:`app.engine.transactions.Transactions.abort` does for the one producer); so
            is each task's whose commit was retried or lasted ``retried_after`` seconds
            (librdkafka's own resend of a timed-out ``EndTxn``), once its transaction ended.
        retried_after: :func:`app.kafka.defaults.retried_after` of the producers' settings.
    """

    def __init__(
        self,
        new_producer: Callable[[str], ProducerPort],
        id_of: Callable[[int], str],
        guard: CallGuard,
        timeout: float,
        stuck_after: float | None = None,
        new_epoch_per_abort: bool = True,
        retried_after: float = 60.0,
    ) -> None:
        self._new_producer = new_producer
        self._new_epoch_per_abort = new_epoch_per_abort
        self._retried_after = retried_after
        self._retried: set[str] = set()  # tasks whose commit may have left an EndTxn behind
        self.epoch_bumps = 0
        self._id_of = id_of
        self._guard = guard
        self._timeout = timeout
        self._stuck_after = stuck_after or timeout + _GRACE_S
        self._producers: dict[str, ProducerPort] = {}  # transactional id → producer
        self._tasks: dict[int, str] = {}  # task → transactional id
        self._open: dict[str, ProducerPort] = {}  # producers with an open transaction
        self._current: str | None = None
        self._failed = False  # fenced or fatal: nothing can be aborted any more (exit 3)

    # ---- the assignment --------------------------------------------------------------------

    def assign(self, tasks: Iterable[int]) -> None:
        """Make and initialise the producer of each new task (fences its previous owner)."""
        for task in sorted(set(tasks) - set(self._tasks)):
            txn_id = self._id_of(task)
            if txn_id not in self._producers:
                self._producers[txn_id] = self._initialised(txn_id)
                log.info("task %d: producer %s initialised", task, txn_id)
            self._tasks[task] = txn_id

    def revoke(self, tasks: Iterable[int]) -> None:
        """Forget ``tasks`` (their transactions are committed or aborted by now) and release
        the producers no task uses any more."""
        for task in tasks:
            self._tasks.pop(task, None)
        for txn_id in set(self._producers) - set(self._tasks.values()):
            self._open.pop(txn_id, None)
            self._producers.pop(txn_id).flush(0)
            if self._current == txn_id:
                self._current = None

    @property
    def tasks(self) -> list[int]:
        return sorted(self._tasks)

    def select(self, task: int) -> str:
        """Produce through task ``task``'s producer until the next :meth:`select`."""
        self._current = self._tasks.get(task)
        return self._current or self._id_of(task)

    # ---- ProducerPort ----------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        callback: Callable[[Any, Any], None] | None = None,
        on_delivery: Callable[[Any, Any], None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """A record goes through the selected task's producer, whatever its partition (an
        output keeps its input partition with ``keep_partition``); the writer of a task's
        changelog records or positions selects that task first."""
        txn_id = self._current
        if txn_id is None:
            raise KafkaFatalError(
                f"no task producer for a record to {topic}[{partition}]: no task selected, or "
                f"its input partition is not assigned here (assigned tasks: {self.tasks})"
            )
        producer = self._open.get(txn_id)
        if producer is None:
            producer = self._producers[txn_id]
            producer.begin_transaction()  # local: the broker hears of it with the first record
            self._open[txn_id] = producer
        try:
            producer.produce(
                topic, value, key, partition, callback, on_delivery, timestamp, headers
            )
        except KafkaException as exc:
            self._raise_fenced(txn_id, exc)
            raise

    def poll(self, timeout: float = -1) -> int:
        served = sum(p.poll(0) for p in self._producers.values())
        current = self._producers.get(self._current or "")
        if not served and current is not None and timeout != 0:
            served = current.poll(timeout)
        return served

    def flush(self, timeout: float = -1) -> int:
        deadline = time.monotonic() + max(timeout, 0)
        return sum(
            p.flush(max(deadline - time.monotonic(), 0) if timeout >= 0 else -1)
            for p in self._producers.values()
        )

    def init_transactions(self, timeout: float = -1) -> None:
        """Nothing: each task's producer is initialised when the task is assigned."""

    def begin_transaction(self) -> None:
        """Nothing: a task's transaction begins with its first record."""

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        raise RuntimeError("two clusters: positions go to the target's offsets topic")

    def commit_transaction(self, timeout: float = -1) -> None:
        """Commit every open task transaction. Called again after a retriable error, it goes
        on with those still open.

        Raises:
            KafkaException: the first task failed, nothing is committed (the caller aborts).
            KafkaFatalError: fenced, or some tasks committed and another did not (exit 3:
                the restart restores each partition's state from its changelog up to its
                committed position; going on would keep uncommitted state of one task).
        """
        for committed, (txn_id, producer) in enumerate(list(self._open.items())):
            started = time.monotonic()
            try:
                producer.commit_transaction(timeout)
            except KafkaException as exc:
                self._raise_fenced(txn_id, exc)
                if classify(exc) is Reaction.RETRY:
                    self._retried.add(txn_id)
                if committed and classify(exc) is not Reaction.RETRY:
                    self._failed = True
                    raise KafkaFatalError(
                        f"commit of {txn_id} failed ({describe(exc)}) after {committed} other "
                        f"task(s) committed: exiting so the restart restores every partition's "
                        f"state from its changelog at its committed position"
                    ) from exc
                raise
            if time.monotonic() - started >= self._retried_after:
                self._retried.add(txn_id)
            del self._open[txn_id]
        self._renew_retried()

    def abort_transaction(self, timeout: float = -1) -> None:
        """Abort every open task transaction, each task's next one under a new epoch
        (``new_epoch_per_abort``); after a fenced or fatal producer, nothing (the process is
        leaving; the broker aborts them, the new owner's init fences them)."""
        if self._failed:
            self._open.clear()
            return
        for txn_id, producer in list(self._open.items()):
            try:
                producer.abort_transaction(timeout)
            except KafkaException as exc:
                self._raise_fenced(txn_id, exc)
                raise
            del self._open[txn_id]
            self._renew(txn_id, "the abort")
        self._renew_retried()

    # ---- helpers ---------------------------------------------------------------------------

    def _renew(self, txn_id: str, after: str) -> None:
        """Replace the producer of ``txn_id`` by a new, initialised one: a new epoch."""
        self._retried.discard(txn_id)
        if self._new_epoch_per_abort and txn_id in self._producers:
            started = time.monotonic()
            self._producers[txn_id] = self._initialised(txn_id)  # the old one goes
            self.epoch_bumps += 1
            took_ms = (time.monotonic() - started) * 1000
            log.info("task producer %s: new epoch after %s (%.0f ms)", txn_id, after, took_ms)

    def _renew_retried(self) -> None:
        """A new epoch for each task whose ended transaction had a retried or slow commit."""
        for txn_id in sorted(self._retried - set(self._open)):
            self._renew(txn_id, "a retried commit")

    def _initialised(self, txn_id: str) -> ProducerPort:
        """A new producer of ``txn_id``, initialised: fences every earlier epoch of the id."""
        producer = self._new_producer(txn_id)
        self._call(f"init_transactions of {txn_id}", producer.init_transactions)
        return producer

    def _raise_fenced(self, txn_id: str, exc: KafkaException) -> None:
        """A fenced task producer: another instance owns the task now, or the target's
        coordinator aborted the transaction past ``transaction_timeout_ms`` (which bumps the
        epoch too, e.g. after the target was unreachable that long). Re-initialising it could
        fence the rightful owner, so exit 3 and rejoin the group on restart."""
        if classify(exc) in (Reaction.RECREATE, Reaction.FATAL):
            self._failed = True
            raise KafkaFatalError(
                f"task producer {txn_id} was fenced or failed ({describe(exc)}): another "
                f"instance owns its input partition now (or, with none, the target's "
                f"transaction coordinator aborted its transaction past transaction_timeout_ms); "
                f"exiting so the restart rejoins the group"
            ) from exc

    def _call(self, what: str, fn: Callable[[float], None]) -> None:
        """``fn(timeout)`` under the watchdog's deadline; a retriable error is asked again
        after a pause (doubling, as :class:`app.engine.transactions.Transactions`) until
        ``timeout`` has passed."""
        deadline = time.monotonic() + self._timeout
        pause = RETRY_PAUSE_S[0]
        while True:
            try:
                with self._guard.guard(what, self._stuck_after, "transaction coordinator"):
                    fn(self._timeout)
                return
            except KafkaException as exc:
                if classify(exc) is Reaction.RETRY and time.monotonic() < deadline:
                    log.warning("%s: retriable error %s; retrying", what, describe(exc))
                    time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                    pause = min(pause * 2, RETRY_PAUSE_S[1])
                    continue
                raise KafkaFatalError(f"{what}: {describe(exc)}") from exc


class TaskAssignment:
    """What the rebalancer does for tasks on assignment: producers first (fencing), then the
    committed positions from the target's store, as start offsets."""

    def __init__(self, producers: TaskProducers, offsets: OffsetStore, reset_offset: int) -> None:
        self.producers = producers
        self.offsets = offsets
        self._reset_offset = reset_offset

    def assign(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        self.producers.assign(tp.partition for tp in partitions)
        committed = self.offsets.committed(
            [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        )
        log.info("tasks %s: starting at %s", self.producers.tasks, positions_text(committed))
        return [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else self._reset_offset
            )
            for tp in committed
        ]

    def revoke(self, partitions: list[TopicPartition]) -> None:
        self.producers.revoke(tp.partition for tp in partitions)
