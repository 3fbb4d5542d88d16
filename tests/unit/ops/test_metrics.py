"""The metrics' contract: build info, a lag series per *owned* partition, librdkafka's logs."""

from __future__ import annotations

import gc
import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import confluent_kafka
import pytest
from confluent_kafka import Producer, TopicPartition

from app.ops.lag import LagReport
from app.ops.logs import LIBRDKAFKA_LOGGER, JsonFormatter, librdkafka_logging
from app.ops.metrics import Metrics
from tests.unit.engine.test_checkpoint_and_rebalance import Rig
from tests.unit.fakes import FakeConsumer


class WatermarkConsumer(FakeConsumer):
    """A consumer whose cached high watermarks the test sets."""

    def __init__(self, assignment: list[tuple[str, int]]) -> None:
        super().__init__(assignment)
        self.highs: dict[tuple[str, int], int] = {}

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        assert cached, "the lag report must not ask the broker"
        return (0, self.highs.get((tp.topic, tp.partition), -1))


def lag(metrics: Metrics, topic: str, partition: int) -> float | None:
    return metrics.registry.get_sample_value(
        "eos_bridge_consumer_lag_records", {"topic": topic, "partition": str(partition)}
    )


def test_build_info_names_the_client_versions() -> None:
    labels = {
        "version": "unknown",
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
    }
    samples = Metrics().registry.get_sample_value
    found = samples("eos_bridge_build_info", labels)
    if found is None:  # installed (pip install -e): the package's version
        from importlib.metadata import version

        found = samples("eos_bridge_build_info", {**labels, "version": version("eos-bridge")})
    assert found == 1


def test_lag_is_the_watermark_minus_the_position_between_checkpoints() -> None:
    consumer = WatermarkConsumer([("in", 0), ("in", 1), ("in", 2)])
    consumer.positions = {("in", 0): 10, ("in", 1): 7}  # partition 2: nothing consumed yet
    consumer.highs = {("in", 0): 25, ("in", 1): 7, ("in", 2): 9}
    metrics = Metrics()
    report = LagReport(consumer, metrics, every=3600.0)

    report.update()
    assert (lag(metrics, "in", 0), lag(metrics, "in", 1), lag(metrics, "in", 2)) == (15, 0, None)

    consumer.positions[("in", 0)] = 20
    report.maybe_update()  # within `every`: unchanged, no client call per batch
    assert lag(metrics, "in", 0) == 15
    report.update()
    assert lag(metrics, "in", 0) == 5


def test_lag_after_checkpoints_at_most_once_per_gap_then_made_up_between(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 100 ms commit interval does not ask the client for the assignment every checkpoint;
    a skipped update comes with a later batch once the gap has passed."""
    clock = SimpleNamespace(now=100.0)
    monkeypatch.setattr("app.ops.lag.time", SimpleNamespace(monotonic=lambda: clock.now))
    consumer = WatermarkConsumer([("in", 0)])
    consumer.positions, consumer.highs = {("in", 0): 10}, {("in", 0): 25}
    metrics = Metrics()
    report = LagReport(consumer, metrics, every=3600.0, after_checkpoint_gap=1.0)

    report.after_checkpoint()  # the first: at once
    assert lag(metrics, "in", 0) == 15
    consumer.positions[("in", 0)] = 20
    clock.now += 0.1
    report.after_checkpoint()  # within the gap: skipped
    report.maybe_update()
    assert lag(metrics, "in", 0) == 15
    clock.now += 0.9
    report.maybe_update()  # the gap has passed: made up (not after `every`)
    assert lag(metrics, "in", 0) == 5


def test_revoked_and_lost_partitions_drop_their_lag_series() -> None:
    """A partition's series lives only on its owner, so a sum over the pods is the group's lag."""
    rig = Rig()
    rig.metrics.lag.labels("in", "0").set(3)
    rig.metrics.lag.labels("in", "1").set(4)
    rig.callback("on_revoke")  # revokes in-0
    assert lag(rig.metrics, "in", 0) is None and lag(rig.metrics, "in", 1) == 4

    rig.metrics.lag.labels("in", "0").set(3)
    rig.callback("on_lost")
    assert lag(rig.metrics, "in", 0) is None
    rig.metrics.forget_partitions([("in", 9)])  # never reported: nothing to drop, no error


def test_last_checkpoint_time_moves_with_each_commit() -> None:
    metrics = Metrics()
    before = metrics.registry.get_sample_value("eos_bridge_last_checkpoint_timestamp_seconds")
    assert before is not None and before > 0  # the process start until the first commit
    metrics.checkpoint_committed(0.01, 5)
    after = metrics.registry.get_sample_value("eos_bridge_last_checkpoint_timestamp_seconds")
    assert after is not None and after >= before
    assert metrics.registry.get_sample_value("eos_bridge_checkpoints_total") == 1


@pytest.fixture
def librdkafka_lines() -> Iterator[io.StringIO]:
    """What the bridge's JSON formatter writes for the librdkafka logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(LIBRDKAFKA_LOGGER)
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


def test_librdkafka_lines_arrive_as_json_log_lines(librdkafka_lines: io.StringIO) -> None:
    """A real client, no broker: port 1 refuses at once, and librdkafka logs that."""
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", **librdkafka_logging()})
    deadline = time.monotonic() + 30
    while "Connection refused" not in librdkafka_lines.getvalue():
        assert time.monotonic() < deadline, "no librdkafka log line within 30 s"
        producer.poll(0.1)  # hands queued log lines to the logger
    line = next(ln for ln in librdkafka_lines.getvalue().splitlines() if "refused" in ln)
    entry = json.loads(line)
    assert entry["logger"] == "librdkafka" and entry["level"] == "ERROR"
    assert "127.0.0.1:1" in entry["message"]


def test_start_up_checks_keep_librdkafka_lines_at_debug(librdkafka_lines: io.StringIO) -> None:
    """The preflight reports a failed connection as one line of its own: librdkafka's FAIL
    lines about it must not add more ERROR lines (they stay visible at DEBUG)."""
    logging.getLogger(LIBRDKAFKA_LOGGER).setLevel(logging.DEBUG)
    try:
        conf = {"bootstrap.servers": "127.0.0.1:1", **librdkafka_logging(reported_elsewhere=True)}
        producer = Producer(conf)
        deadline = time.monotonic() + 30
        while "Connection refused" not in librdkafka_lines.getvalue():
            assert time.monotonic() < deadline, "no librdkafka log line within 30 s"
            producer.poll(0.1)
    finally:
        logging.getLogger(LIBRDKAFKA_LOGGER).setLevel(logging.NOTSET)
    levels = {json.loads(line)["level"] for line in librdkafka_lines.getvalue().splitlines()}
    assert levels == {"DEBUG"}


def test_the_docs_list_every_metric_the_bridge_exports() -> None:
    """docs/operations.md "Metrics" is the metric reference users upgrade by: it must match."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "operations.md").read_text()
    listed = set(re.findall(r"^\| `(eos_bridge_\w+)` \|", page, re.M))
    exported = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in Metrics().registry.collect()
        if family.name.startswith("eos_bridge_")
    }
    assert listed == exported


def test_garbage_collections_are_exported() -> None:
    """python_gc_*: the soak's gc_collections column was always 0 without them."""
    registry = Metrics().registry
    before = registry.get_sample_value("python_gc_collections_total", {"generation": "2"})
    gc.collect()
    after = registry.get_sample_value("python_gc_collections_total", {"generation": "2"})
    assert before is not None and after is not None and after > before
