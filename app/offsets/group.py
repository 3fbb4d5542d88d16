"""Offsets in the source consumer group: KIP-447 exactly-once within one cluster."""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from app.errors import KafkaFatalError
from app.kafka.errors import bridge_error, describe, settling
from app.kafka.ports import CallGuard, ConsumerPort, ProducerPort
from app.kafka.topics import Connection as Address
from app.kafka.topics import client_config, partitions_of

log = logging.getLogger(__name__)

_GRACE_S = 15.0  # the watchdog's margin over librdkafka's own timeout
_LOOKUP_PAUSE_S = 0.2  # between look-ups while the group coordinator moves


class GroupOffsets:
    """The group's committed offsets; written with ``send_offsets_to_transaction`` and the
    consumer's group metadata, so a zombie of an older generation is fenced (KIP-447).

    Args:
        consumer: the group consumer.
        guard: bounds each blocking call (the watchdog).
        timeout: librdkafka timeout of each call; a coordinator that moves or loads is asked
            again, after a short pause, until it has passed.
    """

    def __init__(
        self,
        consumer: ConsumerPort,
        guard: CallGuard,
        timeout: float,
        stuck_after: float | None = None,
    ) -> None:
        self._consumer = consumer
        self._guard = guard
        self._timeout = timeout
        self._stuck_after = stuck_after or timeout + _GRACE_S  # the watchdog's deadline

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The committed offsets (-1001: none). An error of one partition (librdkafka answers
        it in that partition, with offset -1001, and no error for the call) is the call's
        error: taken for "never committed", the partition would start from
        ``auto.offset.reset``."""
        deadline = time.monotonic() + self._timeout
        while True:
            what = "committed offsets"
            try:
                with self._guard.guard("committed", self._stuck_after, "group coordinator"):
                    answer = self._consumer.committed(partitions, timeout=self._timeout)
                failed = next((tp for tp in answer if tp.error is not None), None)
                if failed is None:
                    return answer
                what = f"committed offset of {failed.topic}[{failed.partition}]"
                raise KafkaException(failed.error)
            except KafkaException as exc:
                if not settling(exc):
                    raise bridge_error(what, exc) from exc
                if time.monotonic() >= deadline:
                    raise KafkaFatalError(
                        f"{what} not readable within {self._timeout:.0f}s: {describe(exc)}"
                    ) from exc
                log.warning("%s: %s; asking again", what, describe(exc))
                time.sleep(_LOOKUP_PAUSE_S)

    def put(self, producer: ProducerPort, positions: list[TopicPartition], timeout: float) -> None:
        metadata = self._consumer.consumer_group_metadata()
        producer.send_offsets_to_transaction(positions, metadata, timeout)

    def after_commit(self, positions: list[TopicPartition]) -> None:
        """Nothing: the transaction committed them to the group."""

    def commit(self, positions: list[TopicPartition]) -> None:
        with self._guard.guard("commit", self._stuck_after, "group coordinator"):
            self._consumer.commit(offsets=positions, asynchronous=False)


def committed_offsets(
    conn: Address, group: str, topic: str, timeout: float = 30.0
) -> dict[int, int]:
    """The group's committed offset per partition (-1001 = none), read by a consumer of its
    own (for tools, the demo and tests, not the running bridge).

    Retries retriable errors (coordinator loading or moving) until ``timeout``.
    """
    consumer = Consumer(client_config(conn, **{"group.id": group}))
    deadline = time.monotonic() + timeout
    try:
        tps = [TopicPartition(topic, p) for p in partitions_of(conn, topic)]
        while True:
            try:
                answer = consumer.committed(tps, timeout=10)
                for tp in answer:
                    if tp.error is not None:  # a partition's own error: not "none committed"
                        raise KafkaException(tp.error)
                return {tp.partition: tp.offset for tp in answer}
            except KafkaException as exc:
                if not settling(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()
