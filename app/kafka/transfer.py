"""Move the records of one topic to other topics exactly once, under a consumer group.

Each transaction holds what a batch of the source topic became and the group's new position on
the source (``send_offsets_to_transaction``), so a transfer killed half-way and run again
writes nothing twice, and a finished one finds nothing left. ``init_transactions`` on the one
stable transactional id aborts what a killed predecessor left open before the committed
positions are read. This is ``eos-bridge dlq replay``'s client half (app.commands.replay).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from app.kafka.topics import KafkaRecord, _record, high_watermark, partitions_of

_NONE = -1001  # librdkafka: no committed offset


@dataclass(slots=True, frozen=True)
class Outgoing:
    """One record to write (partition -1: the producer's partitioner places it by key)."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int


class Transfer:
    """A read-committed consumer of ``topic`` under ``group`` and a transactional producer.

    Args:
        conf: the cluster's client configuration (one cluster: source = target).
        group: whose committed offsets on ``topic`` say how far the transfer got.
        transactional_id: stable across runs, so a rerun fences a killed one.
        topic: the topic read.
        timeout: seconds any one client call may take.
    """

    def __init__(
        self, conf: Mapping[str, Any], group: str, transactional_id: str, topic: str, timeout: float
    ) -> None:
        self.topic = topic
        self._conf = conf
        self._timeout = timeout
        self.written: dict[tuple[str, int], int] = {}  # (topic, partition) → last offset written
        self._producer = Producer({**conf, "transactional.id": transactional_id})
        self._producer.init_transactions(timeout)  # aborts a killed run's open transaction
        self._consumer = Consumer(
            {
                **conf,
                "group.id": group,
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )

    def span(self) -> tuple[dict[int, int], dict[int, int]]:
        """Per partition of the topic: where the group stands (0 when it never committed) and
        the last stable offset now (the replay stops there)."""
        tps = [TopicPartition(self.topic, p) for p in partitions_of(self._conf, self.topic)]
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                committed = self._consumer.committed(tps, timeout=self._timeout)
                break
            except KafkaException:  # coordinator loading, a pending transactional commit
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        starts = {tp.partition: max(tp.offset, 0) if tp.offset != _NONE else 0 for tp in committed}
        ends = {tp.partition: high_watermark(self._consumer, tp, self._timeout) for tp in tps}
        return starts, ends

    def batches(
        self, starts: Mapping[int, int], ends: Mapping[int, int], size: int
    ) -> Iterator[tuple[list[KafkaRecord], dict[int, int]]]:
        """Records from ``starts`` up to ``ends``, at most ``size`` at a time, each batch with
        the positions just after it (the consumer's own at the end: they step over markers)."""
        pending = {p for p in ends if starts.get(p, 0) < ends[p]}
        if not pending:
            return
        self._consumer.assign(
            [TopicPartition(self.topic, p, starts.get(p, 0) or OFFSET_BEGINNING) for p in pending]
        )
        positions = {p: starts.get(p, 0) for p in pending}
        deadline = time.monotonic() + max(self._timeout, 60.0)
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic} partitions {sorted(pending)} not read to the end")
            batch = []
            for msg in self._consumer.consume(num_messages=size, timeout=0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                record = _record(msg)
                if record.offset < ends[record.partition]:
                    batch.append(record)
                    positions[record.partition] = record.offset + 1
            for tp in self._consumer.position([TopicPartition(self.topic, p) for p in pending]):
                if tp.offset >= ends[tp.partition]:
                    positions[tp.partition] = max(positions[tp.partition], tp.offset)
                    pending.discard(tp.partition)
            if batch or not pending:
                deadline = time.monotonic() + max(self._timeout, 60.0)
                yield batch, dict(positions)

    def begin(self, records: list[Outgoing]) -> None:
        """Open a transaction and produce ``records`` into it (flushed: every one delivered)."""
        written = self.written

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                where = (msg.topic(), msg.partition())
                written[where] = max(msg.offset(), written.get(where, -1))

        self._producer.begin_transaction()
        for r in records:
            headers: list[tuple[str, str | bytes | None]] = [*r.headers]
            self._producer.produce(
                r.topic,
                r.value,
                r.key,
                partition=r.partition,
                timestamp=r.timestamp,
                headers=headers,
                on_delivery=delivered,
            )
            self._producer.poll(0)
        if self._producer.flush(self._timeout) > 0:
            raise KafkaException(f"{len(records)} records not delivered in {self._timeout}s")

    def commit(self, positions: Mapping[int, int]) -> None:
        """Add the group's new positions to the open transaction and commit it."""
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(positions.items())]
        metadata = self._consumer.consumer_group_metadata()
        self._producer.send_offsets_to_transaction(offsets, metadata, self._timeout)
        self._producer.commit_transaction(self._timeout)

    def close(self) -> None:
        """Close the consumer; an open transaction is left for the next run's
        ``init_transactions`` to abort."""
        self._consumer.close()


def tails(
    conf: Mapping[str, Any], topic: str, partitions: list[int], count: int, timeout: float
) -> list[KafkaRecord]:
    """The last ``count`` committed records (at most) of each of ``partitions`` of ``topic``."""
    consumer = Consumer(
        {
            **conf,
            "group.id": "eos-bridge-reader",  # never joins or commits: assign() only
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        ranges = {}
        for p in partitions:
            low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout)
            end = high_watermark(consumer, TopicPartition(topic, p), timeout)
            if end > low:
                ranges[p] = (max(low, end - count), end)
        if not ranges:
            return []
        consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in ranges.items()])
        out: list[KafkaRecord] = []
        pending, deadline = set(ranges), time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count * len(ranges), timeout=0.5):
                if msg.error() is None and msg.offset() < ranges[msg.partition()][1]:  # type: ignore[index,operator]
                    out.append(_record(msg))
            for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset >= ranges[tp.partition][1]:
                    pending.discard(tp.partition)
        return out
    finally:
        consumer.close()


def retention_ms(conf: Mapping[str, Any], topic: str, timeout: float) -> int | None:
    """How long ``topic`` keeps a record by its own timestamp, in ms (None: forever, or the
    broker stamps its own time: ``LogAppendTime``)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = AdminClient(dict(conf))  # kept alive until the answer comes
    configs = admin.describe_configs([resource])[resource].result(timeout)
    if configs["message.timestamp.type"].value == "LogAppendTime":
        return None
    retention = int(configs["retention.ms"].value)
    return None if retention < 0 else retention
