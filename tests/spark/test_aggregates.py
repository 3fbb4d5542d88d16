"""Acceptance 1 and 4: the streamed table equals a plain-Python reference, and a backfill over
a range of the topic reproduces the streamed rows of that range."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.kafka.topics import KafkaRecord
from spark_jobs.backfill import run_backfill
from spark_jobs.config import BackfillConfig, KafkaRange, KafkaSource, StreamConfig, WindowSpec
from spark_jobs.stream import StreamSummary, run_stream
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import (
    BAD_VALUES,
    WINDOW_MS,
    Event,
    chunks,
    first_window_ms,
    make_events,
    produce_in_transactions,
)
from tests.spark.reference import aggregate, valid, window_offsets
from tests.spark.tables import latest_version, read_table
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.spark

RSD = 0.05
LATE_COUNT = 3


@dataclass(slots=True, frozen=True)
class Streamed:
    topic: str
    t0_ms: int  # start of the first window
    table: Path
    version: int  # Delta version right after the streaming run
    summary: StreamSummary
    records: list[KafkaRecord]  # the committed topic, read back independently


@pytest.fixture(scope="module")
def streamed(
    spark: SparkSession, kafka: KafkaFixture, tmp_path_factory: pytest.TempPathFactory
) -> Streamed:
    topic = kafka.create_topic(kafka.unique("spark-agg"), partitions=2)
    t0 = first_window_ms()
    batches = chunks(make_events(600, seed=1, t0_ms=t0), 50)  # 600 events over 15 minutes
    batches[3] = [*batches[3], *BAD_VALUES]
    # Last, 14 minutes behind the newest event: older than the 5-minute watermark. One per key,
    # because Spark counts late rows after partial aggregation (per key and window).
    batches.append([Event(f"late-{i}", f"user-{i}", 1000.0, t0 + i) for i in range(LATE_COUNT)])
    produce_in_transactions(kafka, topic, batches)

    work = tmp_path_factory.mktemp("agg")
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic),
        table=str(work / "table"),
        checkpoint=str(work / "checkpoint"),
        window=WindowSpec("1 minute", "5 minutes", RSD),
        max_offsets_per_trigger=300,  # several micro-batches, so windows are updated in place
    )
    summary = run_stream(spark, cfg)
    table = Path(cfg.table)
    return Streamed(topic, t0, table, latest_version(table), summary, kafka.read_all(topic))


def on_time(records: list[KafkaRecord]) -> list[KafkaRecord]:
    return [r for r in records if not (r.value or b"").startswith(b'{"id": "late-')]


def test_streamed_aggregates_equal_plain_python_reference(
    spark: SparkSession, streamed: Streamed
) -> None:
    reference = aggregate(on_time(streamed.records), WINDOW_MS)
    assert len(reference) > 60  # 15 windows x 5 keys, give or take
    assert_same_aggregates(read_table(spark, streamed.table, streamed.version), reference, RSD)
    assert len(streamed.summary.batch_ids) >= 3
    assert streamed.summary.late_rows_dropped == LATE_COUNT


def test_bad_records_are_kept_aside_with_their_offsets(
    spark: SparkSession, streamed: Streamed
) -> None:
    expected = {
        (r.partition, r.offset, r.value) for r in streamed.records if valid(r.value) is None
    }
    assert len(expected) == len(BAD_VALUES)
    bad = spark.read.format("delta").load(f"{streamed.table}_bad_records").collect()
    assert {(b.partition, b.offset, (b.value or "").encode()) for b in bad} == expected
    assert all(b.error for b in bad)
    assert streamed.summary.bad_records == len(BAD_VALUES)


def test_backfill_over_a_range_equals_the_stream_for_that_range(
    spark: SparkSession, kafka: KafkaFixture, streamed: Streamed
) -> None:
    first_ms, end_ms = (
        streamed.t0_ms + 2 * WINDOW_MS,
        streamed.t0_ms + 5 * WINDOW_MS,
    )  # windows 2, 3 and 4
    streamed_rows = read_table(spark, streamed.table, streamed.version)
    in_range = {g: s for g, s in streamed_rows.items() if first_ms <= g[1] < end_ms}
    assert len(in_range) >= 10

    # Damage the range: drop its rows and plant one the recomputation must remove.
    path = f"delta.`{streamed.table}`"
    spark.sql(
        f"DELETE FROM {path} WHERE unix_millis(window_start) BETWEEN {first_ms} AND {end_ms - 1}"
    )
    spark.sql(
        f"INSERT INTO {path} VALUES ('ghost', timestamp_millis({first_ms}), "
        f"timestamp_millis({first_ms + WINDOW_MS}), 1, 1.0, 1, 1.0, 1.0, 1.0)"
    )
    assert read_table(spark, streamed.table) != streamed_rows

    source = KafkaSource(kafka.bootstrap, streamed.topic)
    by_offsets = window_offsets(streamed.records, streamed.topic, first_ms, end_ms)
    by_time = KafkaRange(starting_timestamp=first_ms, ending_timestamp=end_ms)
    for kafka_range in (by_offsets, by_time):
        before = latest_version(streamed.table)
        summary = run_backfill(spark, BackfillConfig(source, str(streamed.table), kafka_range))
        assert summary.windows_written == len(in_range)
        assert (summary.first_window_us, summary.last_window_us) == (
            first_ms * 1000,
            (end_ms - WINDOW_MS) * 1000,
        )
        assert latest_version(streamed.table) == before + 1, "replace must be one Delta commit"
        assert read_table(spark, streamed.table) == streamed_rows
