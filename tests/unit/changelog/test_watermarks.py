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
    """ListOffsets meets ``code`` (FENCED_LEADER_EPOCH: a cached leader epoch behind an
    election) until the topic's metadata was asked for again, then answers."""

    def __init__(self, refreshes: bool = True, code: int = KafkaError.FENCED_LEADER_EPOCH) -> None:
        self.refreshes, self.asked, self.code = refreshes, 0, code
        self.refreshed: set[str] = set()

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
                future.set_exception(KafkaException(KafkaError(self.code)))
            out[tp] = future
        return out


def test_a_stale_leader_epoch_is_retried_after_a_metadata_refresh() -> None:
    admin = StaleEpochAdmin()
    marks = changelog_watermarks(admin, [("cl", 0), ("cl", 1)], 10, settling=settling)
    assert admin.refreshed == {"cl"}
    assert marks == {("cl", 0): (5, 5), ("cl", 1): (5, 5)}
    assert admin.asked == 3  # earliest: refused, then answered; latest: answered


def test_no_leader_found_by_the_admin_lookup_is_asked_again() -> None:
    """librdkafka's admin ListOffsets answers _NOENT ("Failed to query partition leaders: No
    leaders found") while an election is in flight; a soak's bridge exited on it."""
    admin = StaleEpochAdmin(code=KafkaError._NOENT)
    assert changelog_watermarks(admin, [("cl", 0)], 10, settling=settling) == {("cl", 0): (5, 5)}
    assert admin.refreshed == {"cl"}


def test_a_stale_epoch_past_the_deadline_names_the_partition() -> None:
    with pytest.raises(ChangelogReadError, match=r"changelog cl\[0\]: .*epoch"):
        changelog_watermarks(StaleEpochAdmin(refreshes=False), [("cl", 0)], 0.5,
                             settling=settling)  # fmt: skip


def test_a_refusal_lasting_a_quarter_of_the_timeout_asks_a_new_client() -> None:
    stale, fresh = StaleEpochAdmin(refreshes=False), StaleEpochAdmin()
    fresh.refreshed.add("cl")  # a new client's metadata is current
    renewed: list[StaleEpochAdmin] = []

    def renew() -> StaleEpochAdmin:
        renewed.append(fresh)
        return fresh

    marks = changelog_watermarks(stale, [("cl", 0)], 1.0, settling=settling, renew=renew)
    assert marks == {("cl", 0): (5, 5)} and renewed == [fresh]


class StuckLookupAdmin:
    """librdkafka's leader lookup that cannot find the leader in its metadata: the request
    takes its whole timeout (on a fake clock), then LEADER_NOT_AVAILABLE."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.timeouts: list[float] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        pass  # a refresh that does not help

    def list_offsets(self, request: dict[Any, Any], **kw: Any) -> dict[Any, Future[Any]]:
        self.timeouts.append(kw["request_timeout"])
        self.clock[0] += kw["request_timeout"]
        out: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            out[tp] = future
            future.set_exception(KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)))
        return out


def test_a_leader_lookup_holding_the_request_leaves_time_for_a_new_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The soak's exit: LEADER_NOT_AVAILABLE for all 30 s although the partition had a new
    leader within a second; one round used the whole timeout, so no new client was asked."""
    clock = [1000.0]
    fake_time = type(
        "T",
        (),
        {
            "monotonic": staticmethod(lambda: clock[0]),
            "sleep": staticmethod(lambda s: clock.__setitem__(0, clock[0] + s)),
        },
    )
    monkeypatch.setattr("changelog.topics.time", fake_time)
    stuck, fresh = StuckLookupAdmin(clock), StaleEpochAdmin()
    fresh.refreshed.add("cl")

    marks = changelog_watermarks(stuck, [("cl", 0)], 30.0, settling=settling, renew=lambda: fresh)
    assert marks == {("cl", 0): (5, 5)}
    assert max(stuck.timeouts) <= 5.0  # no round takes more than a sixth of the timeout
    assert clock[0] - 1000.0 < 15.0  # the new client answered before half the timeout


class NoOffsetAdmin(StaleEpochAdmin):
    """ListOffsets answers without an error but with offset -1001 ``blank`` times, then 5."""

    def __init__(self, blank: int) -> None:
        super().__init__()
        self.blank = blank

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        self.asked += 1
        out: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            offset = -1001 if self.asked <= self.blank else 5
            future.set_result(type("Info", (), {"offset": offset}))
            out[tp] = future
        return out


def test_an_answer_without_an_offset_is_asked_again() -> None:
    """The soak's wipe: a high watermark of -1001 (no error) made recovery take the stored
    offset for one past the changelog's end, wipe the store and restore nothing."""
    admin = NoOffsetAdmin(blank=2)
    assert changelog_watermarks(admin, [("cl", 0)], 10, settling=settling) == {("cl", 0): (5, 5)}
    assert admin.asked == 4  # earliest: two blank answers, then 5; latest: 5


def test_no_offset_until_the_deadline_names_the_partition() -> None:
    with pytest.raises(ChangelogReadError, match=r"changelog cl\[0\]: .*offset -1001"):
        changelog_watermarks(NoOffsetAdmin(blank=10**9), [("cl", 0)], 0.5, settling=settling)
