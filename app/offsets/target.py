"""Offsets in the target cluster: cross-cluster exactly-once (docs/cross-cluster.md).

The source group cannot take offsets inside a transaction of another cluster, so the consumed
positions are written as records to a compacted topic of the target cluster, inside the
output transaction (:meth:`TargetOffsets.put`), and read back with a read_committed consumer
to the end (:meth:`TargetOffsets.committed`): from the beginning once, then tailed from where
the last read ended (Kafka Connect's KafkaBasedLog), so a look-up costs the records committed
since the previous one, not the topic's history. The source group still does assignment and
liveness. Fencing comes from one transactional id per input partition
(:mod:`app.engine.tasks`), not from the group's metadata.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from app.errors import ConfigError, KafkaFatalError
from app.kafka.errors import describe
from app.kafka.ports import CallGuard, ProducerPort, TaskRouting
from app.kafka.topics import high_watermark

log = logging.getLogger(__name__)

_GRACE_S = 15.0  # the watchdog's margin over our own deadline
_READ_BATCH = 10_000
_READ_WAIT = 0.05  # consume() waits this long for a batch not full (the fetcher runs ahead)
_PREFETCH_KB = 4096
_FORMAT = 1  # version of the value's JSON
# The reader's position is gone (below the log start or past the end: a topic deleted records,
# recreated or truncated): the tail cannot go on, the read starts again from the beginning.
_POSITION_LOST = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)


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
    return fold_positions({}, group, records)


def fold_positions(
    positions: dict[tuple[str, int], int],
    group: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
) -> dict[tuple[str, int], int]:
    """``positions`` (updated in place and returned) after the later ``records``, folded as
    :func:`latest_positions` does: folding a log in pieces gives what folding it whole does."""
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


def prepare_offsets_topic(
    admin: AdminClient, topic: str, timeout: float, *, create: bool = True
) -> None:
    """Create the offsets topic (compacted, one partition) when missing; refuse one that is not
    compacted (exit 2, one line: positions would be deleted by retention). ``create=False``
    (``check-config``): a missing one is left for ``run`` to create."""
    existing = admin.list_topics(timeout=timeout).topics
    if topic not in existing:
        if not create:
            return
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


def _lost(message: Message) -> bool:
    """Whether ``message`` is the reader's error that its position is gone."""
    error = message.error()
    return error is not None and error.code() in _POSITION_LOST


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
        new_reader: makes the reader, and the client that lists the topic's end offsets, from
            their settings (default a confluent-kafka Consumer).
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
            # Assigned between look-ups, the reader prefetches the records committed meanwhile:
            # at most this much of them waits in memory until the next look-up reads it.
            "queued.max.messages.kbytes": _PREFETCH_KB,
            **reader_config,
            "group.id": f"{group}.offsets-reader",  # never subscribes nor commits
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",  # a lost position: read again, never skip records
        }
        make = new_reader or Consumer  # new_reader: the composition's maker
        self._reader = make(conf)
        # The partitions and end offsets are asked of a client never assigned: a fetch of the
        # assigned reader, long-polling the broker (fetch.wait.max.ms), would hold them back.
        # read_uncommitted: its end offsets are the high watermarks; a read_committed client
        # is answered the LSO, below any transaction open now, which would not be waited for.
        self._lister = make(
            {**conf, "group.id": f"{group}.offsets-lister", "isolation.level": "read_uncommitted"}
        )
        self.topic = topic
        self._group = group
        self._writer = writer
        self._guard = guard
        self._timeout = timeout
        self._stuck_after = stuck_after or timeout + _GRACE_S
        self._mirror = mirror  # the source group's consumer (mirror_offsets_to_source)
        self._assigned: list[TopicPartition] = []  # none: the next read starts from the beginning
        self._start_over = "the first read"  # why, when none
        self._positions: dict[tuple[str, int], int] = {}  # folded up to the reader's position
        self.last_read_records = 0  # records the last look-up read (its cost)

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
        self._lister.close()

    def _read_to_end(self) -> dict[tuple[str, int], int]:
        """Every committed record up to the high watermarks read now. A read_committed
        position stops at the LSO: waiting for position >= those watermarks waits out any
        transaction open now (its positions may be the latest), never a later one. Each
        client call is bounded by the watchdog (``stuck_after``), the whole read by
        ``timeout``.

        The reader stays assigned between look-ups and the positions folded so far are kept:
        each look-up reads from where the last one ended (``last_read_records`` counts what
        it read). The first reads from the beginning; so does one after the partitions of
        the topic changed, after its end fell below the reader's position (recreated or
        truncated), after the reader's position was lost, and after a failed read."""
        deadline = time.monotonic() + self._timeout
        with self._guard.guard("offsets topic metadata", self._stuck_after, self.topic):
            tps, ends = self._watermarks()
        self.last_read_records = 0
        try:
            reason = self._cannot_tail(tps, ends)
            if reason:
                self._read_from_beginning(tps, reason)
            while True:  # the position first: a tail with nothing new reads nothing
                done = [
                    p.offset >= ends[p.partition] or ends[p.partition] == 0
                    for p in self._reader.position(self._assigned)
                ]
                if all(done):
                    return self._positions
                if time.monotonic() > deadline:
                    raise KafkaFatalError(
                        f"offsets topic {self.topic!r} not read to its end ({ends}) within "
                        f"{self._timeout:.0f}s: a transaction holds it open"
                    )
                self._read_batch(tps)
        except BaseException:
            self._assigned = []  # where the read got to is unknown: the next starts over
            self._start_over = "the last read failed"
            raise

    def _cannot_tail(self, tps: list[TopicPartition], ends: dict[int, int]) -> str:
        """Why the read cannot go on from the reader's position ("" when it can)."""
        if not self._assigned:
            return self._start_over
        if {tp.partition for tp in tps} != {tp.partition for tp in self._assigned}:
            return f"its partitions changed to {sorted(ends)}"
        for p in self._reader.position(self._assigned):
            if p.offset > ends[p.partition]:
                return f"its end {ends[p.partition]} fell below the position read {p.offset}"
        return ""

    def _read_from_beginning(self, tps: list[TopicPartition], reason: str) -> None:
        """Forget the positions folded so far and assign ``tps`` from the beginning."""
        log.info("reading the offsets topic %s from the beginning: %s", self.topic, reason)
        self._positions = {}
        self._reader.assign(tps)
        self._assigned = tps

    def _read_batch(self, tps: list[TopicPartition]) -> None:
        """Fold one batch into the positions; when the reader's position was lost, start
        again from the beginning instead."""
        with self._guard.guard("offsets topic read", self._stuck_after, self.topic):
            batch: list[Message] = self._reader.consume(_READ_BATCH, _READ_WAIT)
        lost = next((m.error() for m in batch if _lost(m)), None)
        if lost is not None:
            self._read_from_beginning(tps, f"the reader's position was lost: {describe(lost)}")
            return  # nothing of this batch is kept: it may hold records from before
        records = [(m.key(), m.value()) for m in batch if m.error() is None]
        self.last_read_records += len(records)
        fold_positions(self._positions, self._group, records)

    def _watermarks(self) -> tuple[list[TopicPartition], dict[int, int]]:
        """The offsets topic's partitions (from the beginning) and their high watermarks."""
        try:
            meta = self._lister.list_topics(self.topic, timeout=self._timeout).topics[self.topic]
            tps = [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in meta.partitions]
            # An end below 0 is asked again (high_watermark): taken for an end, it would end
            # the read at once and resume from stale positions.
            ends = {tp.partition: high_watermark(self._lister, tp, self._timeout) for tp in tps}
        except (KafkaException, KeyError, TypeError, TimeoutError) as exc:
            raise KafkaFatalError(f"offsets topic {self.topic!r}: {describe(exc)}") from exc
        return tps, ends
