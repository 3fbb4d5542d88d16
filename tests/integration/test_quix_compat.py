"""Acceptance 5: a changelog written by a real Quix Streams 3.28 application is recovered by our
recovery code with the same filtering outcome as Quix's own recovery rule.

Quix runs in its own virtualenv (``make quix-venv``): the app and Quix's ``RecoveryPartition``
are subprocesses (:mod:`tests.support.quix_app`, :mod:`tests.support.quix_oracle`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from confluent_kafka import TopicPartition

from app.pipeline import Pipeline
from bench.contenders import quix_python
from changelog.naming import changelog_topic_name
from tests.support.bridge import REPO
from tests.support.kafka import KafkaFixture
from tests.support.quix import QuixOracle
from tests.support.statekafka import open_backend, recover_all, state_settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def quix() -> Iterator[QuixOracle]:
    with QuixOracle() as oracle:
        yield oracle


def run_quix(
    kafka: KafkaFixture, topic: str, group: str, state_dir: Path, n: int, guarantee: str
) -> None:
    args = [kafka.bootstrap, topic, group, str(state_dir), str(n), guarantee]
    proc = subprocess.run(
        [str(quix_python()), "-m", "tests.support.quix_app", *args],
        cwd=REPO, capture_output=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]


def rewind_group(kafka: KafkaFixture, group: str, topic: str, offset: int) -> None:
    consumer = kafka.consumer(group=group)
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_quix_changelog_recovers_with_quix_filtering(
    kafka: KafkaFixture, quix: QuixOracle, tmp_path: Path, guarantee: str
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
    applied, reference = quix.recover(records, {src: committed})
    applied_all, everything = quix.recover(records, {src: n})
    assert 0 < applied < applied_all, "the filter must skip some records"
    assert reference != everything

    settings = state_settings(kafka, src, tmp_path / "ours", group)
    backend = open_backend(settings, Pipeline().count(name="default"))  # finds Quix's topic
    recover_all(backend, [(src, 0)], committed=committed)
    store = backend.partition("default", src, 0).store
    ours = {("default", k): v for k, v in store.scan(b"", b"\xff" * 8)}
    backend.close()
    assert ours == reference
    counts = {k: orjson.loads(v) for (_, k), v in ours.items() if k.endswith(b'"count"')}
    assert sum(counts.values()) == committed, "each committed input counted exactly once"
