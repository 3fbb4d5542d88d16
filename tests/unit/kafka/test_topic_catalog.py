"""TopicCatalog: route checks answered from memory, refreshed on a timer, never per record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from app.kafka.catalog import TopicCatalog


@dataclass
class Topic:
    error: Any = None


@dataclass
class Metadata:
    topics: dict[str, Topic]


@dataclass
class FakeCluster:
    """``list_topics`` of a client: counts requests, can fail on demand."""

    names: set[str] = field(default_factory=set)
    requests: int = 0
    down: bool = False

    def list_topics(self, timeout: float) -> Metadata:
        self.requests += 1
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down"))
        return Metadata({n: Topic() for n in self.names} | {"broken": Topic(error="x")})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_answers_come_from_memory_until_the_refresh_interval() -> None:
    cluster, clock = FakeCluster({"a"}), Clock()
    catalog = TopicCatalog(cluster.list_topics, ["a"], refresh_s=10, clock=clock)
    for _ in range(10_000):
        assert catalog("a") and not catalog("missing")
    assert cluster.requests == 0  # both answers cached: no request per record


def test_created_and_deleted_topics_are_seen_after_a_refresh() -> None:
    cluster, clock = FakeCluster({"a"}), Clock()
    catalog = TopicCatalog(cluster.list_topics, ["a"], refresh_s=10, clock=clock)
    cluster.names = {"b"}
    clock.now += 9.9
    assert catalog("a") and not catalog("b")
    clock.now += 0.1
    assert catalog("b") and not catalog("a")
    assert not catalog("broken")  # listed with an error: not usable
    assert cluster.requests == 1


def test_a_failed_refresh_keeps_the_previous_answers_and_retries_later() -> None:
    cluster, clock = FakeCluster({"a"}), Clock()
    catalog = TopicCatalog(cluster.list_topics, ["a"], refresh_s=10, clock=clock)
    cluster.down, clock.now = True, clock.now + 10
    assert catalog("a") and catalog("a")
    assert cluster.requests == 1  # one try per interval, not one per question
    cluster.down, cluster.names, clock.now = False, {"c"}, clock.now + 10
    assert catalog("c") and not catalog("a")
