"""Fake Kafka clients for the core's unit tests: one method per seam, every call recorded.

A fake raises, per method, the errors queued in ``fail[method]`` (one per call, in order),
then behaves; so a test states exactly which call fails how, as Kafka Streams'
``MockProducer`` does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from app.engine.watchdog import Watchdog
from app.kafka.ports import ConsumerPort, Message, ProducerPort, Rebalanced
from app.ops.health import Health


def kafka_exc(code: int, **flags: bool) -> KafkaException:
    """``KafkaException(KafkaError(code, ...))`` with librdkafka's flags."""
    return KafkaException(KafkaError(code, f"test error {code}", **flags))


class Scripted:
    """Base of the fakes: ``calls`` in order; ``fail[name]`` errors raised by name."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, list[BaseException]] = defaultdict(list)

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.fail[name]:
            raise self.fail[name].pop(0)


class FakeProducer(Scripted):
    """A transactional producer; ``produced`` holds (topic, value, key)."""

    def __init__(self) -> None:
        super().__init__()
        self.produced: list[tuple[str, Any, Any]] = []
        self.reported: list[bool] = []  # per produce: asked for its own delivery report
        self.sent_offsets: list[list[tuple[str, int, int]]] = []  # per send_offsets call

    def init_transactions(self, timeout: float = -1) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        self._call("send_offsets_to_transaction")
        self.sent_offsets.append([(tp.topic, tp.partition, tp.offset) for tp in positions])

    def commit_transaction(self, timeout: float = -1) -> None:
        self._call("commit_transaction")

    def abort_transaction(self, timeout: float = -1) -> None:
        self._call("abort_transaction")

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        self._call("produce")
        self.produced.append((topic, value, key))
        self.reported.append((callback or on_delivery) is not None)

    def poll(self, timeout: float = -1) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        self._call("flush")
        return 0


def produce_keywords(args: tuple[Any, ...]) -> dict[str, Any]:
    """confluent-kafka's positional ``produce(topic, value, key, partition, callback,
    on_delivery, timestamp, headers)`` tail as keywords; ``callback`` is the alias of
    ``on_delivery``, and None or a zero timestamp means not given."""
    names = ("partition", "callback", "on_delivery", "timestamp", "headers")
    named = dict(zip(names, args, strict=False))  # a shorter tail: the rest not given
    callback = named.pop("callback", None)
    if callback is not None:
        named["on_delivery"] = callback
    return {k: v for k, v in named.items() if k == "partition" or v not in (None, 0)}


class FakeMessage:
    """A consumed record (or a consumer error when ``error`` is given)."""

    def __init__(
        self,
        topic: str = "in",
        partition: int = 0,
        offset: int = 0,
        value: bytes | None = b"{}",
        key: bytes | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self._t, self._p, self._o, self._v, self._k, self._e = (
            topic, partition, offset, value, key, error,
        )  # fmt: skip

    def error(self) -> KafkaError | None:
        return self._e

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes | None:
        return self._v

    def key(self) -> bytes | None:
        return self._k

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


class FakeConsumer(Scripted):
    """A group consumer: ``batches`` are handed out by consume(); seeks and pauses recorded."""

    def __init__(
        self, assignment: list[tuple[str, int]] | None = None, incremental: bool = False
    ) -> None:
        super().__init__()
        # As librdkafka: the incremental protocol refuses assign(), the eager one the others.
        self.incremental = incremental
        self._assignment = [TopicPartition(t, p) for t, p in assignment or [("in", 0)]]
        self.committed_offsets: dict[tuple[str, int], int] = {}
        self.positions: dict[tuple[str, int], int] = {}
        self.seeks: list[tuple[str, int, int]] = []
        self.paused: list[tuple[str, int]] = []
        self.resumed: list[tuple[str, int]] = []
        # paused now: as librdkafka, a pause outlives unassign and assign; only resume() ends it
        self.pausing: set[tuple[str, int]] = set()
        self.batches: list[list[FakeMessage]] = []
        self.on_empty: Any = None  # called when batches run out (e.g. to stop the loop)
        self.assigned: list[tuple[str, int, int]] = []  # the last assign(), with offsets

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        self._call("committed")
        return [
            TopicPartition(
                tp.topic, tp.partition, self.committed_offsets.get((tp.topic, tp.partition), -1001)
            )
            for tp in partitions
        ]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), -1001)
            )
            for tp in partitions
        ]

    def seek(self, partition: TopicPartition) -> None:
        self._call("seek")
        self.seeks.append((partition.topic, partition.partition, partition.offset))

    def consumer_group_metadata(self) -> str:
        return "group-metadata"

    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[False]) -> None:
        self._call("commit")

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        if self.batches:
            return self.batches.pop(0)
        if self.on_empty is not None:
            self.on_empty()
        return []

    def subscribe(
        self,
        topics: list[str],
        on_assign: Rebalanced | None = None,
        on_revoke: Rebalanced | None = None,
        on_lost: Rebalanced | None = None,
    ) -> None:
        self.callbacks = {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._call("assign")
        self._protocol(incremental=False)
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in partitions]
        self._assignment = [TopicPartition(tp.topic, tp.partition) for tp in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._call("incremental_assign")
        self._protocol(incremental=True)
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in partitions]
        have = {_key(tp) for tp in self._assignment}
        self._assignment += [
            TopicPartition(tp.topic, tp.partition) for tp in partitions if _key(tp) not in have
        ]

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._call("incremental_unassign")
        self._protocol(incremental=True)
        gone = {_key(tp) for tp in partitions}
        self._assignment = [tp for tp in self._assignment if _key(tp) not in gone]

    def _protocol(self, incremental: bool) -> None:
        if incremental != self.incremental:
            raise KafkaException(KafkaError(KafkaError._STATE, "Erroneous state (protocol)"))

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused += [(tp.topic, tp.partition) for tp in partitions]
        self.pausing.update((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.resumed += [(tp.topic, tp.partition) for tp in partitions]
        self.pausing.difference_update((tp.topic, tp.partition) for tp in partitions)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return (0, -1)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return None

    def close(self) -> None:
        self._call("close")


def _key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


class RecordingGuard:
    """A ``CallGuard`` that records each call's name and deadline, never enforcing them."""

    def __init__(self) -> None:
        self.deadlines: list[tuple[str, float]] = []

    @contextmanager
    def guard(
        self, what: str, seconds: float, where: str = "", consequence: str = ""
    ) -> Iterator[None]:
        self.deadlines.append((what, seconds))
        yield


def idle_watchdog() -> Watchdog:
    """A watchdog whose thread is not started: guards are recorded, never enforced."""
    return Watchdog(Health(stale_after=30.0))


if TYPE_CHECKING:  # mypy (make lint) checks the fakes against the ports the core declares

    def _typed(c: FakeConsumer, p: FakeProducer, m: FakeMessage) -> None:
        consumer: ConsumerPort = c
        producer: ProducerPort = p
        message: Message = m
        del consumer, producer, message
