"""Acceptance 3: the streaming job dies after its Delta commit of a micro-batch but before
Spark's checkpoint commit; on restart Spark replays the batch, and nothing counts twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import KafkaSource, StreamConfig, WindowSpec
from spark_jobs.faults import AFTER_DELTA_WRITE, FAULT_ENV, FAULT_EXIT_CODE
from spark_jobs.stream import run_stream
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import (
    WINDOW_MS,
    chunks,
    first_window_ms,
    make_events,
    produce_in_transactions,
)
from tests.spark.jobs import run_module, tail
from tests.spark.reference import aggregate
from tests.spark.tables import delta_txns, read_table
from tests.support.kafka import KafkaFixture

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

RSD = 0.05
CRASH_BATCH = 1


def test_crash_after_delta_write_before_checkpoint_counts_nothing_twice(
    spark: SparkSession, kafka: KafkaFixture, tmp_path: Path
) -> None:
    topic = kafka.create_topic(kafka.unique("spark-crash"), partitions=2)
    produce_in_transactions(
        kafka,
        topic,
        chunks(make_events(300, seed=3, t0_ms=first_window_ms()), 60),
    )
    table, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic),
        table=str(table),
        checkpoint=str(checkpoint),
        window=WindowSpec("1 minute", "30 minutes", RSD),
        max_offsets_per_trigger=100,  # three batches; the crash hits the second
    )
    args = [
        "--bootstrap", kafka.bootstrap, "--topic", topic, "--table", str(table),
        "--checkpoint", str(checkpoint), "--window", "1 minute", "--watermark", "30 minutes",
        "--max-offsets-per-trigger", "100",
    ]  # fmt: skip
    log = tmp_path / "crashed-run.log"
    code = run_module(
        "spark_jobs.stream", args, {FAULT_ENV: f"{AFTER_DELTA_WRITE}:{CRASH_BATCH}"}, log, 300
    )
    assert code == FAULT_EXIT_CODE, tail(log)

    # The crash landed where intended: Delta holds batch 1, Spark's checkpoint does not.
    txns = delta_txns(table)
    assert [v for _, _, v in txns] == [0, CRASH_BATCH], txns
    app_id = txns[0][1]
    queries = checkpoint / "aggregates"
    assert (queries / "offsets" / str(CRASH_BATCH)).exists()
    assert not (queries / "commits" / str(CRASH_BATCH)).exists()

    summary = run_stream(spark, cfg)  # the restart, in this process's Spark session

    assert summary.batch_ids[0] == CRASH_BATCH, "Spark did not replay the interrupted batch"
    after = delta_txns(table)
    assert {a for _, a, _ in after} == {app_id}, "the restarted query must keep its id"
    versions = [v for _, _, v in after]
    assert versions.count(CRASH_BATCH) == 1, f"batch {CRASH_BATCH} committed twice: {after}"
    assert versions == sorted(versions) and len(versions) >= 3
    assert_same_aggregates(
        read_table(spark, table), aggregate(kafka.read_all(topic), WINDOW_MS), RSD
    )
