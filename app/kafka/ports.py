"""Ports: the client methods the core calls, as :class:`typing.Protocol` s.

The engine, the sink and the offset store are typed against these, never against ``Any``;
confluent-kafka's ``Consumer``/``Producer`` satisfy them, and so do the unit tests' fakes
(``tests/unit/fakes.py``), which mypy checks against the same protocols (httpx's
``BaseTransport`` and the ``MockTransport`` it ships, in small).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TopicPartition,
)

KafkaValue = str | int | float | bool

_LOGICAL = {
    OFFSET_INVALID: "no position",
    OFFSET_BEGINNING: "earliest",
    OFFSET_END: "latest",
    OFFSET_STORED: "stored",
}


def position_text(offset: int) -> str:
    """An offset for a log line or a tool's output: librdkafka's logical offsets in words
    (``no position``, not ``-1001``)."""
    return _LOGICAL.get(offset, str(offset))


def positions_text(partitions: list[TopicPartition]) -> str:
    """``topic[0]@5, topic[1]@no position``: partitions with their offsets, for a log line."""
    return ", ".join(f"{tp.topic}[{tp.partition}]@{position_text(tp.offset)}" for tp in partitions)


class Message(Protocol):
    """One consumed record (or an error event: ``error()`` is not None)."""

    def error(self) -> Any: ...
    def value(self) -> Any: ...
    def key(self) -> Any: ...
    def headers(self) -> Any: ...
    def topic(self) -> Any: ...
    def partition(self) -> Any: ...
    def offset(self) -> Any: ...
    def timestamp(self) -> Any: ...


Rebalanced = Callable[[Any, list[TopicPartition]], None]


class ConsumerPort(Protocol):
    """The group consumer, as the engine, the checkpoint and the offset store use it
    (signatures as confluent-kafka's own type stubs declare them)."""

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]: ...
    def subscribe(
        self,
        topics: list[str],
        on_assign: Rebalanced | None = None,
        on_revoke: Rebalanced | None = None,
        on_lost: Rebalanced | None = None,
    ) -> None: ...
    def assignment(self) -> list[TopicPartition]: ...
    def assign(self, partitions: list[TopicPartition]) -> None: ...
    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...
    def incremental_unassign(self, partitions: list[TopicPartition]) -> None: ...
    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...
    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]: ...
    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[False]) -> Any: ...
    def seek(self, partition: TopicPartition) -> None: ...
    def pause(self, partitions: list[TopicPartition]) -> None: ...
    def resume(self, partitions: list[TopicPartition]) -> None: ...
    def consumer_group_metadata(self) -> Any: ...
    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]: ...
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...
    def close(self) -> None: ...


class ProducerPort(Protocol):
    """The transactional producer, as the transaction owner and the one writer use it."""

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
    ) -> None: ...
    def poll(self, timeout: float = -1) -> int: ...
    def flush(self, timeout: float = -1) -> int: ...
    def init_transactions(self, timeout: float = -1) -> None: ...
    def begin_transaction(self) -> None: ...
    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None: ...
    def commit_transaction(self, timeout: float = -1) -> None: ...
    def abort_transaction(self, timeout: float = -1) -> None: ...


@runtime_checkable
class TaskRouting(Protocol):
    """A producer that writes each input partition's records through its own transactional
    producer (cross-cluster exactly-once, ``app.engine.tasks``)."""

    def select(self, task: int) -> str:
        """Write through task ``task``'s producer from now on; returns its transactional id."""
        ...


class Connection(Protocol):
    """Where a cluster is and how to reach it (``app.config.ConnectionSettings``)."""

    @property
    def bootstrap_servers(self) -> str: ...
    def client_config(self) -> dict[str, KafkaValue]: ...


class CallGuard(Protocol):
    """Bounds one blocking client call (``app.engine.watchdog.Watchdog.guard``): librdkafka
    does not always honour its own timeouts."""

    def guard(
        self, what: str, seconds: float, where: str = "", consequence: str = ""
    ) -> AbstractContextManager[None]: ...


NewProducer = Callable[[], ProducerPort]
# produce(topic, value, key, partition, None, None, timestamp[, headers]): the producer's own
# method, for a loop that produces by itself (the fused path); room(topic, value, key, headers,
# partition, timestamp): the local queue was full, produce once there is room.
Produce = Callable[..., None]
Room = Callable[[str, bytes | None, Any, Any, int, int], None]
