"""Acceptance 2: records of aborted bridge transactions are not counted; a reader with
read_uncommitted (Spark's default) would have counted exactly those records."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import KafkaRange, KafkaSource, StreamConfig, WindowSpec
from spark_jobs.fixed import fixed_spec
from spark_jobs.plan import AggregationPlan
from spark_jobs.source import read_range
from spark_jobs.stream import run_stream
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import (
    WINDOW_MS,
    Event,
    chunks,
    first_window_ms,
    make_events,
    produce_in_transactions,
)
from tests.spark.reference import aggregate
from tests.spark.tables import collect_windows, read_table
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.spark

RSD = 0.05


def test_aborted_transactions_are_excluded_and_read_uncommitted_would_count_them(
    spark: SparkSession, kafka: KafkaFixture, tmp_path: Path
) -> None:
    topic = kafka.create_topic(kafka.unique("spark-aborts"), partitions=2)
    batches = chunks(make_events(320, seed=2, t0_ms=first_window_ms()), 40)
    aborted = frozenset({1, 4, 5})
    produce_in_transactions(kafka, topic, batches, aborted)
    aborted_events = [e for i in sorted(aborted) for e in batches[i] if isinstance(e, Event)]

    committed = kafka.read_all(topic, read_committed=True)
    assert len(committed) == 320 - len(aborted_events) == 200
    assert len(kafka.read_all(topic, read_committed=False)) == 320  # aborted data is in the log

    spec = WindowSpec("1 minute", "30 minutes", RSD)
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic),
        table=str(tmp_path / "table"),
        checkpoint=str(tmp_path / "checkpoint"),
        window=spec,
    )
    run_stream(spark, cfg)
    table = read_table(spark, tmp_path / "table")
    assert_same_aggregates(table, aggregate(committed, WINDOW_MS), RSD)

    # Negative control: the same parsing and aggregation over a read_uncommitted read.
    naive_source = KafkaSource(kafka.bootstrap, topic, isolation_level="read_uncommitted")
    raw = read_range(spark, naive_source, KafkaRange("earliest", "latest"))
    _, naive_rows = AggregationPlan.compile(fixed_spec(window=spec)).rows(raw, streaming=False)
    naive = collect_windows(naive_rows)
    counted = {g: s.record_count for g, s in table.items()}
    extra = {g: s.record_count - counted.get(g, 0) for g, s in naive.items()}
    assert set(counted) <= set(naive)
    per_window_aborted = Counter((e.key, e.ts - e.ts % WINDOW_MS) for e in aborted_events)
    assert {g: n for g, n in extra.items() if n} == dict(per_window_aborted)
    assert sum(extra.values()) == len(aborted_events) == 120
