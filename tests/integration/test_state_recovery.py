"""Changelog recovery against a real broker: filter rule, markers, open transactions, wipes,
topic checks and time-boxed progress."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.wiring import state_root
from app.errors import ConfigError
from app.sink.collector import RecordCollector
from app.state import reset_state
from changelog.format import changelog_headers
from changelog.naming import changelog_topic_name
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.statekafka import checkpoint, open_backend, recover_all, state_settings

pytestmark = pytest.mark.integration


def _values(backend, src: str, keys: list[bytes]) -> dict[bytes, bytes | None]:  # type: ignore[no-untyped-def]
    view = backend.partition("count", src, 0)
    return {k: view.get(k) for k in keys}


def test_recovery_applies_committed_checkpoints_only(kafka: KafkaFixture, tmp_path: Path) -> None:
    src = kafka.create_topic(kafka.unique("in"), 1)
    settings = state_settings(kafka, src, tmp_path / "a", kafka.unique("g"))
    changelog = changelog_topic_name(settings.group_id, src, "count")
    producer = kafka.transactional_producer()
    tp = (src, 0)

    backend = open_backend(settings)
    recover_all(backend, [tp], committed=-1001)
    view = backend.partition("count", src, 0)
    view.set(b"a", b"1")
    view.set(b"b", b"1")
    checkpoint(backend, producer, {tp: 10})  # committed with input offset 10
    view.set(b"a", b"100")
    checkpoint(backend, producer, {tp: 15}, commit=False)  # aborted
    view.set(b"a", b"2")
    view.delete(b"b")
    checkpoint(backend, producer, {tp: 20})  # committed with input offset 20
    # At-least-once crash: changelog produced and committed, input offsets never committed,
    # local state never written (after_commit is not reached).
    producer.begin_transaction()
    backend.produce_changelogs(RecordCollector(producer), {tp: 30})  # nothing dirty: nothing sent
    for key, value in ((b"a", b"999"), (b"c", b"1")):
        producer.produce(
            changelog, value, key, partition=0, headers=changelog_headers("default", {src: 29})
        )
    producer.commit_transaction(30)
    backend.close()

    ends_committed = kafka.end_offsets(changelog, read_committed=False)[0]
    record_offsets = {r.offset for r in kafka.read_all(changelog, read_committed=False)}
    assert ends_committed - 1 not in record_offsets, "the changelog must end with a marker"

    for wipe in (False, True):  # resume from the stored offset, then from scratch
        if wipe:
            reset_state(state_root(settings))
        backend = open_backend(settings)
        recover_all(backend, [tp], committed=20)
        assert _values(backend, src, [b"a", b"b", b"c"]) == {b"a": b"2", b"b": None, b"c": None}
        backend.close()

    # Had the input offset 30 been committed, the last checkpoint would belong to the state.
    reset_state(state_root(settings))
    backend = open_backend(settings)
    recover_all(backend, [tp], committed=30)
    assert _values(backend, src, [b"a", b"c"]) == {b"a": b"999", b"c": b"1"}
    backend.close()


def test_recovery_waits_for_an_open_transaction_before_the_high_watermark(
    kafka: KafkaFixture, tmp_path: Path
) -> None:
    """The target is the high watermark, not the last stable offset: committed records behind
    another producer's open transaction must not be missed."""
    src = kafka.create_topic(kafka.unique("in"), 1)
    settings = state_settings(kafka, src, tmp_path, kafka.unique("g"))
    changelog = changelog_topic_name(settings.group_id, src, "count")
    tp = (src, 0)
    backend = open_backend(settings)
    recover_all(backend, [tp], committed=-1001)
    backend.close()
    zombie = kafka.transactional_producer()
    zombie.begin_transaction()
    zombie.produce(
        changelog, b"7", b"z", partition=0, headers=changelog_headers("default", {src: 1})
    )
    zombie.flush(30)
    live = kafka.transactional_producer()
    live.begin_transaction()
    live.produce(changelog, b"1", b"d", partition=0, headers=changelog_headers("default", {src: 2}))
    live.commit_transaction(30)

    reset_state(state_root(settings))
    backend = open_backend(settings)
    backend.assign([tp])
    assert not backend.recover({tp: 10}, 2.0), "recovery must not end behind an open transaction"
    assert backend.pending_recovery() == [tp]
    # What the budget alone cannot show (a slow machine may simply not have got there): the
    # restore aims at the high watermark, past the open transaction and the record behind it.
    hw = kafka.end_offsets(changelog, read_committed=False)[0]
    assert hw > kafka.end_offsets(changelog)[0], "the zombie's transaction must still be open"
    assert [(p.partition, p.target) for p in backend.progress()] == [(0, hw)]
    zombie.abort_transaction(30)
    recover_all(backend, [tp], committed=10)
    assert _values(backend, src, [b"d", b"z"]) == {b"d": b"1", b"z": None}
    backend.close()


def test_recovery_is_time_boxed_and_reports_progress(kafka: KafkaFixture, tmp_path: Path) -> None:
    src = kafka.create_topic(kafka.unique("in"), 2)
    settings = state_settings(kafka, src, tmp_path, kafka.unique("g"))
    changelog = changelog_topic_name(settings.group_id, src, "count")
    open_backend(settings).close()  # creates the changelog topic
    n = 60_000
    headers = [changelog_headers("default", {src: i}) for i in range(n)]
    kafka.seed(
        changelog,
        [b"%d" % i for i in range(n)],
        [b"k%d" % (i % 5000) for i in range(n)],
        1,
        headers,
    )

    backend = open_backend(settings)
    tps = [(src, 0), (src, 1)]
    backend.assign(tps)
    # A zero budget starts the restores and returns before consuming anything.
    assert not backend.recover({tp: n for tp in tps}, 0.0)
    progress = {(p.changelog, p.partition): p for p in backend.progress()}
    assert set(progress) == {(changelog, 1)}, "partition 0 has nothing to restore"
    assert progress[(changelog, 1)].target == n and progress[(changelog, 1)].remaining > 0
    assert backend.pending_recovery() == [(src, 1)]
    wait_until(lambda: backend.recover({tp: n for tp in tps}, 0.05), 120, "restores done", 0)
    assert backend.progress() == []
    view = backend.partition("count", src, 1)
    assert [view.get(b"k%d" % k) for k in (0, 4999)] == [b"%d" % (n - 5000), b"%d" % (n - 1)]
    backend.close()


def test_changelog_with_wrong_partition_count_is_refused(
    kafka: KafkaFixture, tmp_path: Path
) -> None:
    src = kafka.create_topic(kafka.unique("in"), 3)
    settings = state_settings(kafka, src, tmp_path, kafka.unique("g"))
    changelog = changelog_topic_name(settings.group_id, src, "count")
    kafka.create_topic(changelog, 2, {"cleanup.policy": "compact"})
    with pytest.raises(
        ConfigError,
        match=rf"changelog topic '{changelog}' has 2 partitions but its input topic has 3",
    ):
        open_backend(settings)


def test_changelog_that_is_not_compacted_is_refused(kafka: KafkaFixture, tmp_path: Path) -> None:
    src = kafka.create_topic(kafka.unique("in"), 1)
    settings = state_settings(kafka, src, tmp_path, kafka.unique("g"))
    changelog = changelog_topic_name(settings.group_id, src, "count")
    kafka.create_topic(changelog, 1, {"cleanup.policy": "delete"})
    with pytest.raises(ConfigError, match=rf"'{changelog}' has cleanup.policy=delete, not compact"):
        open_backend(settings)


def test_changelog_topic_is_created_compacted(kafka: KafkaFixture, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    src = kafka.create_topic(kafka.unique("in"), 4)
    settings = state_settings(kafka, src, tmp_path, kafka.unique("g"))
    open_backend(settings).close()
    changelog = changelog_topic_name(settings.group_id, src, "count")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, changelog)
    config = admin.describe_configs([resource])[resource].result(30)
    assert config["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(changelog, timeout=10).topics[changelog].partitions) == 4
    open_backend(settings).close()  # existing and right: accepted
