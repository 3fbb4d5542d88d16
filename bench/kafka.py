"""Broker-side probes the harness polls while a contender runs: progress, output, cleanup."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from app.kafka.topics import create_topic, end_offsets, partitions_of


class Probe:
    """Watches one run: has output appeared, has the group committed the input end offsets.
    ``output_bootstrap``: the output's cluster when it is not the input's
    (:class:`bench.xcluster.XProbe`)."""

    def __init__(
        self, bootstrap: str, group: str, input_topic: str, output_topic: str,
        output_bootstrap: str | None = None,
    ) -> None:  # fmt: skip
        self._ends = {p: e for p, e in end_offsets(bootstrap, input_topic).items() if e > 0}
        out = output_bootstrap or bootstrap
        self._consumer = Consumer(
            {
                "bootstrap.servers": out,
                "group.id": group,  # offsets lookups only: never subscribes or commits
                "enable.auto.commit": False,
                # Watermarks of the output: appended records count (librdkafka's default,
                # read_committed, would report the last stable offset instead).
                "isolation.level": "read_uncommitted",
                "log_level": 0,
            }
        )
        self._inputs = [TopicPartition(input_topic, p) for p in self._ends]
        self._group = group
        self._outputs = [TopicPartition(output_topic, p) for p in partitions_of(out, output_topic)]

    @property
    def total(self) -> int:
        return sum(self._ends.values())

    @property
    def output_partitions(self) -> int:
        return len(self._outputs)

    def appended(self) -> int | None:
        """Records appended to the output so far, transaction markers included (the sum of
        its high watermarks); None while a new topic's leader is not known yet."""
        try:
            return sum(
                self._consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1]
                for tp in self._outputs
            )
        except KafkaException:
            return None

    def output_started(self) -> bool:
        return bool(self.appended())

    def committed(self) -> int:
        """Input records the group has committed so far (0 while the coordinator loads)."""
        try:
            tps = self._consumer.committed(self._inputs, timeout=5)
        except KafkaException:
            return 0
        return sum(max(0, tp.offset) for tp in tps)

    def caught_up(self) -> bool:
        return self.committed() >= self.total and self._hops_caught_up()

    def _hops_caught_up(self) -> bool:
        """A regrouping contender's repartition topics (``<group>-…-repartition``: the
        bridge's and Kafka Streams') committed to their ends too: its outputs come from them."""
        topics = self._consumer.list_topics(timeout=5).topics
        hops = [
            TopicPartition(name, p)
            for name, meta in topics.items()
            if name.startswith(f"{self._group}-") and name.endswith("-repartition")
            for p in meta.partitions
        ]
        if not hops:
            return True
        try:
            committed = self._consumer.committed(hops, timeout=5)
            ends = [self._consumer.get_watermark_offsets(tp, 5, False)[1] for tp in hops]
        except KafkaException:
            return False
        return all(tp.offset >= end for tp, end in zip(committed, ends, strict=True))

    def close(self) -> None:
        self._consumer.close()


@contextlib.contextmanager
def broker_or_embedded(bootstrap: str | None) -> Iterator[str]:
    """``bootstrap`` itself, or an embedded one-broker cluster for the ``with`` block."""
    if bootstrap:
        yield bootstrap
        return
    from devkit.kafka import LocalKafka  # only when the bench starts its own broker

    cluster = LocalKafka(Path(tempfile.mkdtemp(prefix="bench-kafka-")), brokers=1)
    cluster.start()
    try:
        yield cluster.bootstrap
    finally:
        cluster.stop()


def create_topics(bootstrap: str, names: list[str], partitions: int, **config: str) -> None:
    """Create ``names`` and wait for their leaders (the project's own helper, per topic)."""
    for name in names:
        create_topic(bootstrap, name, partitions, 1, config)


def delete_topics_of(bootstrap: str, *needles: str) -> None:
    """Delete every topic whose name contains one of ``needles`` (run outputs, changelogs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if any(n in t for n in needles)]
    if names:
        for future in admin.delete_topics(names, operation_timeout=30).values():
            with contextlib.suppress(KafkaException):  # already gone
                future.result(30)


def count_committed(bootstrap: str, topic: str, timeout: float = 120.0) -> int:
    """Records a read_committed reader sees in ``topic`` (up to the current end offsets)."""
    ends = {p: e for p, e in end_offsets(bootstrap, topic).items() if e > 0}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-counter",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        seen, pending = 0, set(ends)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.5):
                if m.error() is None and m.offset() < ends[m.partition()]:
                    seen += 1
            positions = consumer.position([TopicPartition(topic, p) for p in pending])
            pending = {tp.partition for tp in positions if tp.offset < ends[tp.partition]}
        return seen
    finally:
        consumer.close()
