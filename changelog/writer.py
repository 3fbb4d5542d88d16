"""Produce a checkpoint's changelog records and learn the offset each partition ends at.

Checkpoint step 1 hands one run of records per dirty store partition to the bridge's one
writer (a :class:`RecordSink`). Only the *last* record of a run reports its delivery: that
report (served by the producer flush in step 2) gives the changelog partition's last offset,
which step 5 stores in RocksDB next to the data (the idempotent producer keeps a partition's
records in order, so the last one has the highest offset). Delivery failures are the sink's
to report; what stays here is which partitions still wait for their offset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from changelog.format import Headers

ChangelogPartition = tuple[str, int]


class RecordSink(Protocol):
    """The producer side the writer needs (the bridge's ``app.sink.collector.RecordCollector``)."""

    def send_run(
        self,
        topic: str,
        partition: int,
        records: Mapping[bytes, bytes | None],
        headers: Headers,
        delivered: Callable[[str, int, int], None],
    ) -> None:
        """Produce ``records`` in order; call ``delivered(topic, partition, offset)`` once the
        last one is delivered."""


class _Offsets:
    """Last delivered offset per changelog partition of one checkpoint.

    A fresh object per checkpoint: reports that arrive late for an aborted checkpoint (purged
    records) land on the old object and cannot disturb the next checkpoint.
    """

    __slots__ = ("delivered", "expected")

    def __init__(self) -> None:
        self.delivered: dict[ChangelogPartition, int] = {}
        self.expected: set[ChangelogPartition] = set()

    def on_delivered(self, topic: str, partition: int, offset: int) -> None:
        tp = (topic, partition)
        if offset > self.delivered.get(tp, -1):
            self.delivered[tp] = offset


class ChangelogWriter:
    """Hands changelog records to a sink and tracks their offsets per changelog partition."""

    def __init__(self) -> None:
        self._batch = _Offsets()

    def produce(
        self,
        sink: RecordSink,
        topic: str,
        partition: int,
        records: dict[bytes, bytes | None],
        headers: Headers,
    ) -> None:
        """Produce ``records`` (key → value, None = tombstone) to ``topic[partition]``."""
        if not records:
            return
        batch = self._batch
        sink.send_run(topic, partition, records, headers, batch.on_delivered)
        batch.expected.add((topic, partition))

    def unconfirmed(self) -> int:
        """After the producer flush: changelog partitions whose last record has no report."""
        batch = self._batch
        return len(batch.expected - batch.delivered.keys())

    def offset(self, topic: str, partition: int) -> int | None:
        """Offset of the last record delivered to ``topic[partition]`` in this checkpoint."""
        return self._batch.delivered.get((topic, partition))

    def reset(self) -> None:
        """Start a new checkpoint: forget the offsets of the previous one."""
        self._batch = _Offsets()
