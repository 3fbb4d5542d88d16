"""Offsets in the target cluster: cross-cluster exactly-once (docs/cross-cluster.md).

The source group cannot take offsets inside a transaction of another cluster, so the consumed
positions are written as records to a compacted topic of the target cluster, inside the
output transaction (:meth:`TargetOffsets.put`), and read back with a read_committed consumer
to the end (:meth:`TargetOffsets.committed`). The source group still does assignment and
liveness. Fencing comes from one transactional id per input partition
(:mod:`app.engine.tasks`), not from the group's metadata.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from app.errors import ConfigError, KafkaFatalError
from app.kafka.errors import describe
from app.kafka.ports import CallGuard, ProducerPort, TaskRouting
from app.kafka.topics import high_watermark

log = logging.getLogger(__name__)

_GRACE_S = 15.0  # the watchdog's margin over our own deadline
_READ_BATCH = 10_000
_FORMAT = 1  # version of the value's JSON


def offsets_key(group: str, topic: str, partition: int) -> bytes:
    """The record key of one input partition's position: ``["group","topic",partition]``."""
    return json.dumps([group, topic, partition], separators=(",", ":")).encode()


def decode_key(key: bytes) -> tuple[str, str, int] | None:
    """``(group, topic, partition)`` of a key, None when it is not one of ours."""
    try:
        group, topic, partition = json.loads(key)
    except (ValueError, TypeError):
        return None
    if not (isinstance(group, str) and isinstance(topic, str) and isinstance(partition, int)):
        return None
    return group, topic, partition


def offsets_value(position: int, writer: str) -> bytes:
    """The record value: the position (next offset to read) and the writer's transactional id."""
    data = {"v": _FORMAT, "position": position, "writer": writer}
    return json.dumps(data, separators=(",", ":")).encode()


def decode_position(value: bytes | None) -> int | None:
    """The position a value holds; None for a tombstone or a value that is not one of ours."""
    if value is None:
        return None
    try:
        position = json.loads(value).get("position")
    except (ValueError, AttributeError):
        return None
    return position if isinstance(position, int) and position >= 0 else None


def latest_positions(
    group: str, records: Iterable[tuple[bytes | None, bytes | None]]
) -> dict[tuple[str, int], int]:
    """The last position per ``(topic, partition)`` of ``group`` among ``(key, value)``
    records in log order (a tombstone forgets the partition)."""
    positions: dict[tuple[str, int], int] = {}
    for key, value in records:
        decoded = decode_key(key) if key is not None else None
        if decoded is None or decoded[0] != group:
            continue
        position = decode_position(value)
        if position is None:
            positions.pop((decoded[1], decoded[2]), None)
        else:
            positions[(decoded[1], decoded[2])] = position
    return positions


def prepare_offsets_topic(admin: AdminClient, topic: str, timeout: float) -> None:
    """Create the offsets topic (compacted, one partition) when missing; refuse one that is not
    compacted (exit 2, one line: positions would be deleted by retention)."""
    existing = admin.list_topics(timeout=timeout).topics
    if topic not in existing:
        spec = NewTopic(topic, 1, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([spec], operation_timeout=timeout)[topic].result(timeout)
            log.info("created the offsets topic %s (compacted, 1 partition)", topic)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in describe(exc):  # another instance was quicker
                raise ConfigError(
                    f"offsets_topic {topic!r}: cannot create it: {describe(exc)}"
                ) from None
        return
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    policy = admin.describe_configs([resource])[resource].result(timeout)["cleanup.policy"].value
    if "compact" not in str(policy):
        raise ConfigError(
            f"offsets_topic {topic!r} has cleanup.policy={policy}: it must be compacted "
            f"(cleanup.policy=compact), or retention deletes committed positions"
        )


class TargetOffsets:
    """Positions in a compacted topic of the target cluster.

    Args:
        reader_config: librdkafka settings of the target cluster for the reading consumer.
        mirror: the source group's consumer, to mirror committed positions to (advisory).
        topic: the offsets topic.
        group: the consumer group whose positions these are (part of each key).
        writer: the transactional id written next to a position when the producer does not
            route by task.
        guard: bounds each blocking call (the watchdog).
        timeout: how long reading to the end may take (one line, exit 3, past it).
        stuck_after: the watchdog's deadline for each blocking client call of the read (the
            bridge's ``stuck_call_timeout``); default ``timeout`` + 15 s.
        new_reader: makes the reader from its settings (default a confluent-kafka Consumer).
    """

    def __init__(
        self,
        reader_config: Mapping[str, Any],
        topic: str,
        group: str,
        writer: str,
        guard: CallGuard,
        timeout: float,
        mirror: Any = None,
        stuck_after: float | None = None,
        new_reader: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        conf = {
            **reader_config,
            "group.id": f"{group}.offsets-reader",  # never subscribes nor commits
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "isolation.level": "read_committed",
        }
        self._reader = (new_reader or Consumer)(conf)  # new_reader: the composition's maker
        self.topic = topic
        self._group = group
        self._writer = writer
        self._guard = guard
        self._timeout = timeout
        self._stuck_after = stuck_after or timeout + _GRACE_S
        self._mirror = mirror  # the source group's consumer (mirror_offsets_to_source)

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        positions = self._read_to_end()
        return [
            TopicPartition(tp.topic, tp.partition, positions.get((tp.topic, tp.partition), -1001))
            for tp in partitions
        ]

    def put(self, producer: ProducerPort, positions: list[TopicPartition], timeout: float) -> None:
        routing = producer if isinstance(producer, TaskRouting) else None
        for tp in positions:
            writer = routing.select(tp.partition) if routing is not None else self._writer
            key = offsets_key(self._group, tp.topic, tp.partition)
            producer.produce(self.topic, offsets_value(tp.offset, writer), key)

    def after_commit(self, positions: list[TopicPartition]) -> None:
        """``mirror_offsets_to_source``: the same positions to the source group, asynchronously,
        for the usual lag tools; advisory, never read back (a failure is only logged)."""
        if self._mirror is not None and positions:
            try:
                self._mirror.commit(offsets=positions, asynchronous=True)
            except KafkaException as exc:
                log.info("mirroring positions to the source group: %s", describe(exc))

    def commit(self, positions: list[TopicPartition]) -> None:
        raise RuntimeError("TargetOffsets commits inside transactions only (exactly-once)")

    def close(self) -> None:
        self._reader.close()

    def _read_to_end(self) -> dict[tuple[str, int], int]:
        """Every committed record up to the high watermarks read now. A read_committed
        position stops at the LSO: waiting for position >= those watermarks waits out any
        transaction open now (its positions may be the latest), never a later one. Each
        client call is bounded by the watchdog (``stuck_after``), the whole read by
        ``timeout``."""
        deadline = time.monotonic() + self._timeout
        with self._guard.guard("offsets topic metadata", self._stuck_after, self.topic):
            tps, ends = self._watermarks()
        self._reader.assign(tps)
        records: list[tuple[bytes | None, bytes | None]] = []
        while True:
            with self._guard.guard("offsets topic read", self._stuck_after, self.topic):
                batch = self._reader.consume(_READ_BATCH, 0.2)
            records.extend((m.key(), m.value()) for m in batch if m.error() is None)
            done = [
                p.offset >= ends[p.partition] or ends[p.partition] == 0
                for p in self._reader.position(tps)
            ]
            if all(done):
                break
            if time.monotonic() > deadline:
                raise KafkaFatalError(
                    f"offsets topic {self.topic!r} not read to its end ({ends}) within "
                    f"{self._timeout:.0f}s: a transaction holds it open"
                )
        self._reader.unassign()
        return latest_positions(self._group, records)

    def _watermarks(self) -> tuple[list[TopicPartition], dict[int, int]]:
        """The offsets topic's partitions (from the beginning) and their high watermarks."""
        try:
            meta = self._reader.list_topics(self.topic, timeout=self._timeout).topics[self.topic]
            tps = [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in meta.partitions]
            # An end below 0 is asked again (high_watermark): taken for an end, it would end
            # the read at once and resume from stale positions.
            ends = {tp.partition: high_watermark(self._reader, tp, self._timeout) for tp in tps}
        except (KafkaException, KeyError, TypeError, TimeoutError) as exc:
            raise KafkaFatalError(f"offsets topic {self.topic!r}: {describe(exc)}") from exc
        return tps, ends
