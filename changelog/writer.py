"""Produce changelog records into the checkpoint's transaction and learn their offsets.

Checkpoint step 1 produces one record per dirty key through the bridge's transactional
producer; the delivery reports (served by the producer flush in step 2) give each changelog
partition's last offset, which step 5 stores in RocksDB next to the data.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaException

from app.errors import CheckpointAborted
from changelog.format import Headers

log = logging.getLogger(__name__)

ChangelogPartition = tuple[str, int]


class _Deliveries:
    """Delivery outcomes of one checkpoint's changelog records.

    A fresh object per checkpoint: reports that arrive late for an aborted checkpoint (purged
    records) land on the old object and cannot disturb the next checkpoint.
    """

    __slots__ = ("errors", "offsets", "pending")

    def __init__(self) -> None:
        self.offsets: dict[ChangelogPartition, int] = {}
        self.errors: list[str] = []
        self.pending = 0

    def on_delivery(self, err: Any, msg: Any) -> None:
        self.pending -= 1
        if err is not None:
            self.errors.append(f"{err} (changelog {msg.topic()}[{msg.partition()}])")
            return
        tp = (msg.topic(), msg.partition())
        offset = msg.offset()
        if offset > self.offsets.get(tp, -1):
            self.offsets[tp] = offset


class ChangelogWriter:
    """Produces changelog records and tracks their delivery per changelog partition."""

    def __init__(self) -> None:
        self._batch = _Deliveries()

    def produce(
        self,
        producer: Any,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        """Produce one record to ``topic[partition]`` (waiting when the local queue is full).

        Raises:
            CheckpointAborted: the producer refused the record (the checkpoint must abort).
        """
        batch = self._batch
        batch.pending += 1
        while True:
            try:
                producer.produce(
                    topic, value, key, partition=partition, headers=headers,
                    on_delivery=batch.on_delivery,
                )  # fmt: skip
                return
            except BufferError:
                producer.poll(0.05)  # queue full: serve deliveries, then retry
            except KafkaException as exc:
                batch.pending -= 1
                raise CheckpointAborted(
                    f"changelog produce to {topic}[{partition}] failed: {exc}"
                ) from exc

    def verify(self) -> None:
        """After the producer flush: every changelog record of this checkpoint is delivered.

        Raises:
            CheckpointAborted: a record failed or is still unconfirmed.
        """
        batch = self._batch
        if batch.errors:
            first, count = batch.errors[0], len(batch.errors)
            raise CheckpointAborted(f"{count} changelog delivery error(s), first: {first}")
        if batch.pending:
            raise CheckpointAborted(f"{batch.pending} changelog record(s) not confirmed")

    def offset(self, topic: str, partition: int) -> int | None:
        """Offset of the last record delivered to ``topic[partition]`` in this checkpoint."""
        return self._batch.offsets.get((topic, partition))

    def reset(self) -> None:
        """Start a new checkpoint: forget offsets and errors of the previous one."""
        self._batch = _Deliveries()
