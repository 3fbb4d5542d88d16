"""The offset-store port."""

from __future__ import annotations

from typing import Protocol

from confluent_kafka import TopicPartition

from app.kafka.ports import ProducerPort


class OffsetStore(Protocol):
    """What is committed for a set of input partitions, and how positions are committed.

    Positions are the next offset to read (``consumer.position()``), never last offset + 1.
    """

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The committed position of each partition (a negative offset: none committed).

        Raises:
            KafkaFatalError: unreadable within the store's deadline.
            BridgeError: a mapped error no retry repairs.
        """

    def put(self, producer: ProducerPort, positions: list[TopicPartition], timeout: float) -> None:
        """Put ``positions`` into ``producer``'s open transaction (exactly-once). The
        transaction owner runs this under its retry and error mapping."""

    def after_commit(self, positions: list[TopicPartition]) -> None:
        """``positions`` were committed in a transaction (a store may mirror them elsewhere)."""

    def commit(self, positions: list[TopicPartition]) -> None:
        """Commit ``positions`` outside any transaction (at-least-once, after a flush)."""
