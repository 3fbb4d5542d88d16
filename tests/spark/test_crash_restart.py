"""Acceptance 3: the streaming job dies after its Delta commit of a micro-batch but before
Spark's checkpoint commit; on restart Spark replays the batch, and nothing counts twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import WindowSpec
from spark_jobs.faults import AFTER_DELTA_WRITE
from tests.spark.crashes import RSD, CrashingJob, seeded_topic
from tests.spark.faulty_stream import FAULT_EXIT_CODE
from tests.spark.tables import delta_txns
from tests.support.kafka import KafkaFixture

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

CRASH_BATCH = 1


def test_crash_after_delta_write_before_checkpoint_counts_nothing_twice(
    spark: SparkSession, kafka: KafkaFixture, tmp_path: Path
) -> None:
    window = ["--window", "1 minute", "--watermark", "30 minutes"]  # the fixed aggregate
    job = CrashingJob(kafka, seeded_topic(kafka, "spark-crash", seed=3), tmp_path, window)
    job.crash(AFTER_DELTA_WRITE, CRASH_BATCH, FAULT_EXIT_CODE)  # three batches: the second

    # The crash landed where intended: Delta holds batch 1, Spark's checkpoint does not.
    txns = delta_txns(job.table)
    assert [v for _, _, v in txns] == [0, CRASH_BATCH], txns
    app_id = txns[0][1]

    job.restart(spark, window=WindowSpec("1 minute", "30 minutes", RSD))

    after = delta_txns(job.table)
    assert {a for _, a, _ in after} == {app_id}, "the restarted query must keep its id"
    versions = [v for _, _, v in after]
    assert versions.count(CRASH_BATCH) == 1, f"batch {CRASH_BATCH} committed twice: {after}"
    assert versions == sorted(versions) and len(versions) >= 3
    job.assert_table_is_reference(spark)
