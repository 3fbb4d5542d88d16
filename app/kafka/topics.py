"""Create, feed and read topics to the end: for ``verify``, the tools, the demo, tests and bench.

Every helper builds its clients from the caller's connection: ``verify`` and the tools pass
``ConnectionSettings.client_config()``, so they reach Kafka exactly as the bridge does (SASL,
TLS, any ``kafka:`` setting); tests and the bench pass the bare address of a local broker.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

# A bootstrap address, or a whole librdkafka client configuration (SASL, TLS...).
Connection = str | Mapping[str, Any]


def client_config(conn: Connection, **extra: Any) -> dict[str, Any]:
    """A librdkafka configuration for ``conn`` plus ``extra``."""
    base = {"bootstrap.servers": conn} if isinstance(conn, str) else dict(conn)
    return {**base, **extra}


@dataclass(slots=True, frozen=True)
class KafkaRecord:
    """One record as read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int

    def header(self, name: str) -> bytes | None:
        """Value of the last header called ``name``, if any."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


def create_topic(
    conn: Connection,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create a topic and wait until every broker's metadata shows every partition with a
    leader (the next client may ask any broker: one that has not caught up yet answers
    "unknown topic")."""
    admin = AdminClient(client_config(conn))
    spec = NewTopic(name, partitions, replication, config=dict(config or {}))
    admin.create_topics([spec], operation_timeout=timeout)[name].result(timeout)
    deadline = time.monotonic() + timeout
    brokers = [f"{b.host}:{b.port}" for b in admin.list_topics(timeout=5).brokers.values()]
    for address in brokers:  # each broker's own metadata cache, one client each
        alone = AdminClient(client_config(conn, **{"bootstrap.servers": address}))
        while not _led(alone, name, partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"topic {name!r} has no leader for every partition on {address} after "
                    f"{timeout}s"
                )
            time.sleep(0.1)


def _led(admin: AdminClient, name: str, partitions: int) -> bool:
    meta = admin.list_topics(name, timeout=5).topics.get(name)
    parts = list(meta.partitions.values()) if meta is not None and meta.error is None else []
    return len(parts) == partitions and all(p.leader >= 0 for p in parts)


def partitions_of(conn: Connection, topic: str, timeout: float = 10.0) -> list[int]:
    """Partition ids of ``topic``; raises KeyError when the topic does not exist."""
    admin = AdminClient(client_config(conn))
    meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None:
        raise KeyError(f"topic {topic!r} does not exist")
    return sorted(meta.partitions)


def seed(
    conn: Connection,
    topic: str,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    partition: int | None = None,
    headers: Sequence[Sequence[tuple[str, bytes]]] | None = None,
) -> None:
    """Produce ``values`` (idempotently, acks=all) and fail loudly on any delivery error."""
    producer = Producer(client_config(conn, **{"enable.idempotence": True, "linger.ms": 5}))
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
        if keys is not None:
            kwargs["key"] = keys[i]
        if partition is not None:
            kwargs["partition"] = partition
        if headers is not None:
            kwargs["headers"] = list(headers[i])
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60) != 0 or errors:
        raise RuntimeError(f"seeding {topic!r} failed: {errors[:3] or 'flush timed out'}")


def end_offsets(
    conn: Connection, topic: str, read_committed: bool = True, timeout: float = 10.0
) -> dict[int, int]:
    """Per-partition end offset: the last stable offset with read_committed, else high watermark."""
    consumer = _consumer(conn, read_committed)
    try:
        return {
            p: high_watermark(consumer, TopicPartition(topic, p), timeout)
            for p in partitions_of(conn, topic)
        }
    finally:
        consumer.close()


def high_watermark(consumer: Consumer, tp: TopicPartition, timeout: float) -> int:
    """The end offset of ``tp``. An answer below 0 (librdkafka's "invalid", which ListOffsets
    has given without an error while a broker was cut off) is asked again until ``timeout``,
    then is a TimeoutError naming the partition: taken for an end, it would make a read skip
    the partition."""
    deadline = time.monotonic() + timeout
    while True:
        high: int = consumer.get_watermark_offsets(tp, timeout=timeout)[1]
        if high >= 0:
            return high
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{tp.topic}[{tp.partition}]: no end offset (answered {high})")
        time.sleep(0.2)


def read_all(
    conn: Connection,
    topics: str | Iterable[str],
    read_committed: bool = True,
    timeout: float = 60.0,
) -> list[KafkaRecord]:
    """Every record of ``topics`` from the beginning up to the current end offsets (a list of
    :func:`iter_all`)."""
    return list(iter_all(conn, topics, read_committed, timeout))


def iter_all(
    conn: Connection,
    topics: str | Iterable[str],
    read_committed: bool = True,
    timeout: float = 60.0,
) -> Iterator[KafkaRecord]:
    """Every record of ``topics`` from the beginning up to the end offsets at the call, one at
    a time (each partition's in offset order), so millions need not fit in memory at once.
    See :func:`iter_messages`."""
    return map(_record, iter_messages(conn, topics, read_committed, timeout))


def iter_messages(
    conn: Connection,
    topics: str | Iterable[str],
    read_committed: bool = True,
    timeout: float = 60.0,
) -> Iterator[Message]:
    """:func:`iter_all`'s records as the client's own messages (none with an error): for
    readers of tens of millions, to whom a :class:`KafkaRecord` each is most of the cost.

    Done is decided by the consumer position reaching the end offset of every partition, never
    by "saw the last record": the last offset may be a transaction marker. ``timeout`` bounds
    the whole read (TimeoutError).
    """
    names = [topics] if isinstance(topics, str) else list(topics)
    consumer = _consumer(conn, read_committed)
    try:
        ends: dict[tuple[str, int], int] = {}
        for name in names:
            for p, end in end_offsets(conn, name, read_committed).items():
                if end > 0:
                    ends[(name, p)] = end
        # From the log start, wherever it is now (retention or delete_records moved it).
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in ends])
        deadline = time.monotonic() + timeout
        # A partition whose records are all gone (its log start at its end) has nothing to read.
        floor = {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout)[0]
            for t, p in ends
        }
        pending = {tp for tp in ends if floor[tp] < ends[tp]}
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read_all: partitions {sorted(pending)} not read to the end")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                # A consumed message without an error has all three (typed Optional).
                if msg.offset() < ends[(msg.topic(), msg.partition())]:  # type: ignore[operator,index]
                    yield msg
            positions = consumer.position([TopicPartition(t, p) for t, p in pending])
            pending = {
                (tp.topic, tp.partition)
                for tp in positions
                if max(tp.offset, floor[(tp.topic, tp.partition)]) < ends[(tp.topic, tp.partition)]
            }
    finally:
        consumer.close()


def _consumer(conn: Connection, read_committed: bool) -> Consumer:
    settings = {
        "group.id": "eos-bridge-reader",  # never joins or commits: assign() only
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        # Prefetch up to a million records (the queue stays within queued.max.messages.kbytes,
        # 64 MB): small records are read 3x faster than with the default 100,000 (a reader of
        # a 1M-record topic, one local broker: 2.1 s, was 6.8 s).
        "queued.min.messages": 1_000_000,
    }
    return Consumer(client_config(conn, **settings))


def _record(msg: Any) -> KafkaRecord:
    return KafkaRecord(
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        key=msg.key(),
        value=msg.value(),
        headers=tuple(msg.headers() or ()),
        timestamp=msg.timestamp()[1],
    )
