"""The producer's transaction state machine (Kafka Streams' StreamsProducer, in small).

Exactly-once: input offsets are committed inside the transaction with
``send_offsets_to_transaction`` and the group metadata (KIP-447 fencing). At-least-once: the
producer is flushed, then the offsets are committed by the consumer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaException, TopicPartition

from app.errors import CheckpointAborted, KafkaFatalError
from app.kafka.errors import Action, classify, describe

log = logging.getLogger(__name__)
T = TypeVar("T")


class Transactions:
    """Begin, commit (offsets included) and abort, with the DESIGN error policy.

    Args:
        producer: the one producer of this process.
        consumer: the group consumer whose offsets are committed.
        exactly_once: transactional producer (True) or flush-then-commit (False).
        deadline_s: how long a retriable commit/abort may be retried before the outcome is
            called indeterminate (fatal).
    """

    def __init__(self, producer: Any, consumer: Any, exactly_once: bool, deadline_s: float) -> None:
        self._producer = producer
        self._consumer = consumer
        self.exactly_once = exactly_once
        self._deadline_s = deadline_s
        self._open = False

    def init(self, timeout: float) -> None:
        """``init_transactions``: fences a predecessor with our transactional.id and aborts its
        open transaction at once."""
        if self.exactly_once:
            self._call("init_transactions", lambda: self._producer.init_transactions(timeout))

    def begin(self) -> None:
        if self.exactly_once and not self._open:
            self._call("begin_transaction", self._producer.begin_transaction)
        self._open = True

    def commit(self, offsets: list[TopicPartition]) -> None:
        """Commit produced records and ``offsets`` (next offset to read per partition)."""
        if not self.exactly_once:
            self._producer.flush()
            self._open = False
            if offsets:
                try:
                    self._consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException as exc:  # e.g. a rebalance: re-read, duplicates allowed
                    raise CheckpointAborted(f"offset commit: {describe(exc)}") from exc
            return
        if offsets:
            metadata = self._consumer.consumer_group_metadata()
            self._call(
                "send_offsets_to_transaction",
                lambda: self._producer.send_offsets_to_transaction(offsets, metadata, 30),
            )
        self._call("commit_transaction", lambda: self._producer.commit_transaction(30))
        self._open = False

    def abort(self) -> None:
        """Abort the open transaction (nothing in it becomes visible to read_committed)."""
        if self.exactly_once and self._open:
            try:
                self._call("abort_transaction", lambda: self._producer.abort_transaction(30))
            except CheckpointAborted as exc:  # abortable while aborting: nothing more to undo
                log.warning("abort_transaction reported %s", exc)
        self._open = False

    @property
    def producer(self) -> Any:
        return self._producer

    @property
    def open(self) -> bool:
        return self._open

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one client call: retry retriable errors until the deadline, map the rest."""
        deadline = time.monotonic() + self._deadline_s
        while True:
            try:
                return fn()
            except Exception as exc:
                action = classify(exc)
                if action is Action.RETRY and time.monotonic() < deadline:
                    log.warning("%s: retriable error %s; retrying", what, describe(exc))
                    continue
                if action is Action.ABORT:
                    raise CheckpointAborted(f"{what}: {describe(exc)}") from exc
                if action is Action.RETRY:
                    raise KafkaFatalError(
                        f"{what} did not complete within {self._deadline_s:.0f}s "
                        f"({describe(exc)}): the outcome is unknown, exiting so a restart "
                        f"recovers through init_transactions"
                    ) from exc
                raise KafkaFatalError(f"{what}: {describe(exc)}") from exc
