"""The object behind the ``kafka`` fixture: unique names, topics, seeding, reading back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from app.kafka import topics
from app.kafka.topics import KafkaRecord
from app.offsets.group import committed_offsets

# The test brokers' group settings. Under group_protocol=consumer (KIP-848, the bridge's default)
# the broker, not the client, holds a group's session timeout and heartbeat interval: the
# defaults (45 s, 5 s) stay, but the lower bounds allow a test's group the 6 s / 1 s its classic
# twin sets in the client (``fast_handover``). A heartbeat of 1 s makes an assignment change
# reach the members in about a second, as the classic rebalance's JoinGroup round does.
TEST_BROKER_GROUPS: dict[str, object] = {
    "group.consumer.min.session.timeout.ms": 3000,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 1000,
}


def wait_until(condition: Callable[[], bool], timeout: float, what: str, step: float = 0.1) -> None:
    """Poll ``condition`` until it is true; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


class KafkaFixture:
    """Factories against one running cluster; every name it makes is unique per call."""

    def __init__(self, bootstrap: str, replication: int = 1) -> None:
        self.bootstrap = bootstrap
        self.replication = replication

    def fast_handover(
        self, settings: Mapping[str, Any], session_ms: int = 6000, heartbeat_ms: int = 1000
    ) -> dict[str, Any]:
        """A stopped member's partitions move after ``session_ms`` in the group of
        ``settings``, under either protocol: the consumer settings to merge under ``classic``;
        under ``consumer`` (the default) the group's broker-side config, set here (a group
        config may be set before the group exists), and nothing to merge."""
        timeouts = {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms}
        if settings.get("group_protocol", "consumer") == "classic":
            return {**settings.get("consumer", {}), **timeouts}
        set_group_config(self.bootstrap, settings["group_id"], timeouts)
        return dict(settings.get("consumer", {}))

    def unique(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    def create_topic(
        self,
        name: str | None = None,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> str:
        name = name or self.unique("topic")
        topics.create_topic(self.bootstrap, name, partitions, self.replication, config)
        return name

    def seed(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        headers: Sequence[Sequence[tuple[str, bytes]]] | None = None,
    ) -> None:
        topics.seed(self.bootstrap, topic, values, keys, partition, headers)

    def producer(self, **conf: Any) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, **conf})

    def transactional_producer(self, txid: str | None = None, **conf: Any) -> Producer:
        producer = self.producer(**{"transactional.id": txid or self.unique("txn"), **conf})
        producer.init_transactions(30)
        return producer

    def consumer(
        self, group: str | None = None, read_committed: bool = True, **conf: Any
    ) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group or self.unique("group"),
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                **conf,
            }
        )

    def read_all(
        self, topic: str | Sequence[str], read_committed: bool = True, timeout: float = 60.0
    ) -> list[KafkaRecord]:
        return topics.read_all(self.bootstrap, topic, read_committed, timeout)

    def iter_all(
        self, topic: str | Sequence[str], read_committed: bool = True, timeout: float = 60.0
    ) -> Iterator[KafkaRecord]:
        return topics.iter_all(self.bootstrap, topic, read_committed, timeout)

    def iter_messages(
        self, topic: str | Sequence[str], read_committed: bool = True, timeout: float = 60.0
    ) -> Iterator[Message]:
        return topics.iter_messages(self.bootstrap, topic, read_committed, timeout)

    def end_offsets(self, topic: str, read_committed: bool = True) -> dict[int, int]:
        return topics.end_offsets(self.bootstrap, topic, read_committed)

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        return committed_offsets(self.bootstrap, group, topic)

    def topic_names(self) -> list[str]:
        """Every topic of the cluster (a metadata request)."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "topic-names"})
        try:
            return sorted(consumer.list_topics(timeout=30).topics)
        finally:
            consumer.close()


def set_group_config(bootstrap: str, group: str, timeouts: Mapping[str, int]) -> None:
    """Set the KIP-848 group configs ``consumer.session.timeout.ms`` and
    ``consumer.heartbeat.interval.ms`` of ``group`` (IncrementalAlterConfigs, GROUP resource)."""
    entries = [
        ConfigEntry(f"consumer.{key}", str(value), incremental_operation=AlterConfigOpType.SET)
        for key, value in timeouts.items()
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
