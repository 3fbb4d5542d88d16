"""Restore state stores from their changelog topics, outside any rebalance callback.

One :class:`Restorer` per process owns a dedicated ``read_committed`` consumer that is only ever
``assign()``-ed (it never joins a group or commits). Each :class:`RestoreTask` reads one
changelog partition from the store's next offset up to a target end offset taken when the task
starts, keeps or skips each record by the filter rule (:func:`changelog.filter.should_apply`),
and hands every consumed batch to its sink as one write (one RocksDB WriteBatch).

A task is done when the consumer *position* reaches the target — never when "the last record
was seen": the last offset of a transactional changelog is usually a commit marker, which no
consumer ever receives.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import TopicPartition

from changelog.errors import ChangelogReadError, ErrorTest
from changelog.restore_task import RestoreProgress, RestoreTask

log = logging.getLogger(__name__)

# Restore reads whole changelog partitions: large fetches, no partition EOF events.
RESTORE_CONSUMER_DEFAULTS: dict[str, Any] = {
    "enable.partition.eof": False,
    "auto.offset.reset": "earliest",
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "fetch.wait.max.ms": 50,
    # librdkafka waits fetch.queue.backoff.ms (default 1000) before fetching again once its
    # prefetch queue is full; restore drains that queue in a tight loop, so with the default it
    # would sit idle most of the time.
    "fetch.queue.backoff.ms": 10,
}
# Small consume() batches: the records' headers are converted while librdkafka's copy of them
# is still in the CPU cache (~3x less CPU per record at 500 than at 10,000; bench_recovery).
RESTORE_BATCH = 500
_POLL_S = 0.05


def _runs(messages: list[Any], mixed: bool) -> list[tuple[int, int]]:
    """[start, end) ranges of consecutive messages of one (topic, partition)."""
    n = len(messages)
    if not mixed:  # one task: only an error event could differ, and restore() handles those
        return [(0, n)]
    keys = [(m.partition(), m.topic()) for m in messages]
    cuts = [i for i in range(1, n) if keys[i] != keys[i - 1]]
    return list(zip([0, *cuts], [*cuts, n], strict=True))


class Restorer:
    """Runs restore tasks in time-boxed slices on a dedicated assign-only consumer.

    Args:
        make_consumer: builds the ``read_committed`` consumer (called lazily, closed when idle).
        retriable: True for a consumer error librdkafka retries by itself (logged, restore
            goes on); any other ends the restore.
        batch_size: records per ``consume()`` call.
        log_every: seconds between progress log lines.
    """

    def __init__(
        self,
        make_consumer: Callable[[], Any],
        *,
        retriable: ErrorTest,
        batch_size: int = RESTORE_BATCH,
        log_every: float = 5.0,
    ) -> None:
        self._make_consumer = make_consumer
        self._retriable = retriable
        self._consumer: Any = None
        self._batch_size = batch_size
        self._log_every = log_every
        self._tasks: dict[tuple[str, int], RestoreTask] = {}
        self._last_log = time.monotonic()
        self._read = 0  # changelog records consumed, for the progress line's rate
        self._rate_mark = (time.monotonic(), 0)

    @property
    def active(self) -> bool:
        return bool(self._tasks)

    def add(self, task: RestoreTask) -> None:
        """Start restoring ``task`` (a task with nothing to read is done at once)."""
        if task.done:
            return
        self._tasks[(task.changelog, task.partition)] = task
        self._client().incremental_assign(
            [TopicPartition(task.changelog, task.partition, task.start)]
        )
        log.info(
            "restoring %s[%d] from offset %d to %d (%d offsets)",
            task.changelog, task.partition, task.start, task.target, task.target - task.start,
        )  # fmt: skip

    def remove(self, keep: Callable[[RestoreTask], bool]) -> list[RestoreTask]:
        """Stop the tasks for which ``keep`` is False (their partitions went away)."""
        gone = [t for t in self._tasks.values() if not keep(t)]
        for task in gone:
            del self._tasks[(task.changelog, task.partition)]
        if gone and self._consumer is not None:
            self._consumer.incremental_unassign(
                [TopicPartition(t.changelog, t.partition) for t in gone]
            )
        self._close_if_idle()
        return gone

    def run(self, deadline: float) -> list[RestoreTask]:
        """Consume and apply until every task is done or ``deadline`` (monotonic) passes.

        Returns:
            The tasks that finished during this call.

        Raises:
            ChangelogReadError: the changelog cannot be read or holds records we cannot apply.
        """
        # Restore allocates millions of short-lived, acyclic objects (messages, header tuples):
        # the cyclic GC would run every few hundred batches for nothing (~15% of restore CPU).
        collecting = gc.isenabled()
        gc.disable()
        try:
            finished = self._run_until(deadline)
        finally:
            if collecting:
                gc.enable()
        self._close_if_idle()
        return finished

    def _run_until(self, deadline: float) -> list[RestoreTask]:
        finished: list[RestoreTask] = []
        checked = time.monotonic()
        while self._tasks:
            now = time.monotonic()
            if now >= deadline:
                break
            # consume() waits for a full batch or the timeout: a short timeout bounds the
            # wait after the last record (the trailing commit marker is no message).
            messages = self._consumer.consume(self._batch_size, min(deadline - now, _POLL_S))
            self._dispatch(messages)
            # A full batch means more is queued: positions are only asked for once the queue
            # runs dry (the end is near) or now and then for the progress figures.
            if len(messages) < self._batch_size or now - checked >= _POLL_S:
                finished += self._collect_finished()
                checked = now
            self._maybe_log()
        return finished

    def progress(self) -> list[RestoreProgress]:
        return [t.progress() for t in self._tasks.values()]

    def close(self) -> None:
        self._tasks.clear()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # ---- internals -------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._consumer is None:
            self._consumer = self._make_consumer()
        return self._consumer

    def _close_if_idle(self) -> None:
        if not self._tasks and self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _dispatch(self, messages: list[Any]) -> None:
        """Hand each run of consecutive records of one changelog partition to its task."""
        if not messages:
            return
        for start, end in _runs(messages, len(self._tasks) > 1):
            first = messages[start]
            task = self._tasks.get((first.topic(), first.partition()))
            if task is not None:
                task.restore(messages[start:end], self._consumer_error)
            elif first.error() is not None:
                self._consumer_error(first.error(), first)
            # else: the task was removed while its records were in flight
            self._read += end - start

    def _consumer_error(self, err: Any, msg: Any) -> None:
        where = f"changelog {msg.topic()}[{msg.partition()}]"
        if not self._retriable(err):
            raise ChangelogReadError(f"{where}: cannot read: {err.str()}")
        log.warning("%s: consumer error (librdkafka retries): %s", where, err.str())

    def _collect_finished(self) -> list[RestoreTask]:
        tps = [TopicPartition(t.changelog, t.partition) for t in self._tasks.values()]
        for tp in self._consumer.position(tps):
            if tp.offset >= 0:
                self._tasks[(tp.topic, tp.partition)].position = tp.offset
        done = [t for t in self._tasks.values() if t.done]
        for task in done:
            task.sink.finish_restore()
            del self._tasks[(task.changelog, task.partition)]
            log.info(
                "restored %s[%d]: %d records applied, %d skipped (uncommitted input)",
                task.changelog, task.partition, task.applied, task.skipped,
            )  # fmt: skip
        if done:
            self._consumer.incremental_unassign(
                [TopicPartition(t.changelog, t.partition) for t in done]
            )
        return done

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._last_log < self._log_every or not self._tasks:
            return
        since, before = self._rate_mark
        rate = (self._read - before) / max(now - since, 1e-9)
        self._last_log, self._rate_mark = now, (now, self._read)
        left = sum(p.remaining for p in self.progress())
        log.info(
            "state recovery: %d changelog partitions in progress, %d offsets left, %.0f records/s",
            len(self._tasks), left, rate,
        )  # fmt: skip
