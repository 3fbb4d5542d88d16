"""Acceptance 5: a changelog written by a real Quix Streams 3.28 application is recovered by our
recovery code with the same filtering outcome as Quix's own recovery rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import TopicPartition
from quixstreams.state.recovery import RecoveryPartition

from app.devkafka.topics import KafkaRecord
from app.pipeline import Pipeline
from changelog.naming import changelog_topic_name
from tests.support.bridge import REPO
from tests.support.kafka import KafkaFixture
from tests.support.statekafka import open_backend, recover_all, state_settings

pytestmark = pytest.mark.integration


class QuixMessage:
    """A read-back record in the shape Quix's recovery code reads (confluent Message methods)."""

    def __init__(self, record: KafkaRecord) -> None:
        self._r = record

    def headers(self) -> list[tuple[str, bytes]]:
        return list(self._r.headers)

    def key(self) -> bytes | None:
        return self._r.key

    def value(self) -> bytes | None:
        return self._r.value

    def offset(self) -> int:
        return self._r.offset


class RecordingStorePartition:
    """The StorePartition side of Quix's RecoveryPartition: keeps what Quix decided to apply."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, bytes], bytes] = {}
        self.applied = 0

    def recover_from_changelog_message(
        self, cf_name: str, key: bytes, value: bytes | None, offset: int, **_: Any
    ) -> None:
        self.applied += 1
        if value is None:
            self.data.pop((cf_name, key), None)
        else:
            self.data[(cf_name, key)] = value

    def write_changelog_offset(self, offset: int) -> None:
        pass

    def get_changelog_offset(self) -> None:
        return None

    def has_incomplete_ttl_migration(self) -> bool:
        return False

    def complete_recovery(self) -> None:
        pass


def quix_reference(
    records: list[KafkaRecord], committed: dict[str, int]
) -> RecordingStorePartition:
    store = RecordingStorePartition()
    partition = RecoveryPartition("changelog", 0, store, committed, 0, 0)  # type: ignore[arg-type]
    for record in records:
        partition.recover_from_changelog_message(QuixMessage(record))  # type: ignore[arg-type]
    return store


def run_quix(
    kafka: KafkaFixture, topic: str, group: str, state_dir: Path, n: int, guarantee: str
) -> None:
    args = [kafka.bootstrap, topic, group, str(state_dir), str(n), guarantee]
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.quix_app", *args],
        cwd=REPO, capture_output=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]


def rewind_group(kafka: KafkaFixture, group: str, topic: str, offset: int) -> None:
    consumer = kafka.consumer(group=group)
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_quix_changelog_recovers_with_quix_filtering(
    kafka: KafkaFixture, tmp_path: Path, guarantee: str
) -> None:
    src = kafka.create_topic(kafka.unique("quix-in"), 1)
    group = kafka.unique("quix")
    n, committed = 400, 225  # Quix commits every 25 records: 225 is a checkpoint
    values = [orjson.dumps({"id": f"r{i}"}) for i in range(n)]
    kafka.seed(src, values, [b"user-%d" % (i % 9) for i in range(n)])
    run_quix(kafka, src, group, tmp_path / "quix", n, guarantee)
    # Make the checkpoints after input offset 225 "produced but never committed": the
    # at-least-once crash window Quix's filter rule exists for.
    rewind_group(kafka, group, src, committed)

    changelog = changelog_topic_name(group, src, "default")  # Quix's name for store "default"
    records = kafka.read_all(changelog)
    assert len(records) > 100, f"Quix wrote no usable changelog to {changelog}"
    reference = quix_reference(records, {src: committed})
    everything = quix_reference(records, {src: n})
    assert 0 < reference.applied < everything.applied, "the filter must skip some records"
    assert reference.data != everything.data

    settings = state_settings(kafka, src, tmp_path / "ours", group)
    backend = open_backend(settings, Pipeline().count(name="default"))  # finds Quix's topic
    recover_all(backend, [(src, 0)], committed=committed)
    store = backend.partition("default", src, 0).store
    ours = {("default", k): v for k, v in store.scan(b"", b"\xff" * 8)}
    backend.close()
    assert ours == reference.data
    counts = {k: orjson.loads(v) for (_, k), v in ours.items() if k.endswith(b'"count"')}
    assert sum(counts.values()) == committed, "each committed input counted exactly once"
