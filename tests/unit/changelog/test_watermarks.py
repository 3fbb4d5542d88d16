"""changelog_watermarks retries a settling error after refreshing the topic's metadata."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from app.kafka.errors import settling
from changelog.errors import ChangelogReadError
from changelog.topics import changelog_watermarks


class StaleEpochAdmin:
    """ListOffsets meets FENCED_LEADER_EPOCH until the topic's metadata was asked for again
    (a cached leader epoch behind an election), then answers."""

    def __init__(self, refreshes: bool = True) -> None:
        self.refreshes, self.refreshed, self.asked = refreshes, set(), 0

    def list_topics(self, topic: str, timeout: float) -> None:
        if self.refreshes:
            self.refreshed.add(topic)

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        self.asked += 1
        out: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            if tp.topic in self.refreshed:
                future.set_result(type("Info", (), {"offset": 5}))
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.FENCED_LEADER_EPOCH)))
            out[tp] = future
        return out


def test_a_stale_leader_epoch_is_retried_after_a_metadata_refresh() -> None:
    admin = StaleEpochAdmin()
    marks = changelog_watermarks(admin, [("cl", 0), ("cl", 1)], 10, settling=settling)
    assert admin.refreshed == {"cl"}
    assert marks == {("cl", 0): (5, 5), ("cl", 1): (5, 5)}
    assert admin.asked == 3  # earliest: refused, then answered; latest: answered


def test_a_stale_epoch_past_the_deadline_names_the_partition() -> None:
    with pytest.raises(ChangelogReadError, match=r"changelog cl\[0\]: .*epoch"):
        changelog_watermarks(StaleEpochAdmin(refreshes=False), [("cl", 0)], 0.5,
                             settling=settling)  # fmt: skip


def test_a_refusal_lasting_half_the_timeout_asks_a_new_client() -> None:
    stale, fresh = StaleEpochAdmin(refreshes=False), StaleEpochAdmin()
    fresh.refreshed.add("cl")  # a new client's metadata is current
    renewed: list[StaleEpochAdmin] = []

    def renew() -> StaleEpochAdmin:
        renewed.append(fresh)
        return fresh

    marks = changelog_watermarks(stale, [("cl", 0)], 1.0, settling=settling, renew=renew)
    assert marks == {("cl", 0): (5, 5)} and renewed == [fresh]
