"""Issue 31, acceptance 2: the streaming job's driver is SIGKILLed before and after the Delta
commit and before and after the Kafka results commit of a micro-batch; after the restart the
table equals the reference and a read_committed reader of the results topic sees each
batch's results exactly once."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.kafka.topics import KafkaRecord
from spark_jobs.config import KafkaSource, StreamConfig, WindowSpec
from spark_jobs.faults import (
    AFTER_DELTA_WRITE,
    AFTER_KAFKA_COMMIT,
    BEFORE_DELTA_WRITE,
    BEFORE_KAFKA_COMMIT,
    FAULT_ENV,
    FAULT_EXIT_CODE,
)
from spark_jobs.fixed import fixed_spec
from spark_jobs.results import BATCH_HEADER, QUERY_HEADER
from spark_jobs.spec import AggregationSpec, parse_spec
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
from tests.spark.reference import WindowKey, WindowStats, aggregate
from tests.spark.tables import delta_txns, read_table
from tests.support.kafka import KafkaFixture

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

RSD = 0.05
CRASH_BATCH = 1
SIGKILLED = -9
# point → (exit code, Delta txn versions after the crash, batches committed to Kafka after it)
CRASHES = {
    BEFORE_DELTA_WRITE: (SIGKILLED, [0], [0]),
    AFTER_DELTA_WRITE: (FAULT_EXIT_CODE, [0, 1], [0]),
    BEFORE_KAFKA_COMMIT: (SIGKILLED, [0, 1], [0]),
    AFTER_KAFKA_COMMIT: (SIGKILLED, [0, 1], [0, 1]),
}


def results_spec(name: str, results: str) -> AggregationSpec:
    """The fixed aggregate, with its results also to the Kafka topic ``results``."""
    doc = fixed_spec(window=WindowSpec("1 minute", "30 minutes", RSD)).model_dump()
    return parse_spec({**doc, "name": name, "output": {"kafka": {"topic": results}}})


def batches_of(records: list[KafkaRecord]) -> list[int]:
    """The batch id of each result record, from its header."""
    return [int(r.header(BATCH_HEADER) or b"-1") for r in records]


def latest_windows(records: list[KafkaRecord]) -> dict[WindowKey, WindowStats]:
    """Each (key, window)'s last written value, in the reference's shape."""
    latest: dict[WindowKey, WindowStats] = {}
    for record in sorted(records, key=lambda r: int(r.header(BATCH_HEADER) or b"-1")):
        row = json.loads(record.value or b"{}")
        start = datetime.fromisoformat(row["window_start"])
        latest[(row["key"], int(start.timestamp() * 1000))] = WindowStats(
            row["record_count"],
            row["amount_sum"],
            row["distinct_ids"],
            row["amount_p50"],
            row["amount_p95"],
            row["amount_p99"],
        )
    return latest


@pytest.mark.parametrize("point", list(CRASHES))
def test_driver_killed_around_the_delta_and_kafka_commits_writes_each_batch_once(
    spark: SparkSession, kafka: KafkaFixture, tmp_path: Path, point: str
) -> None:
    topic = kafka.create_topic(kafka.unique("spark-kres-in"), partitions=2)
    results = kafka.create_topic(kafka.unique("spark-kres-out"), partitions=2)
    kafka.create_topic(f"{results}.batches", config={"cleanup.policy": "compact"})
    produce_in_transactions(
        kafka, topic, chunks(make_events(300, seed=7, t0_ms=first_window_ms()), 60)
    )
    spec = results_spec(kafka.unique("kres"), results)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    table, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    args = [
        "--spec", str(spec_file), "--bootstrap", kafka.bootstrap, "--topic", topic,
        "--table", str(table), "--checkpoint", str(checkpoint),
        "--max-offsets-per-trigger", "100",  # three batches; the crash hits the second
    ]  # fmt: skip
    log = tmp_path / "crashed-run.log"
    code = run_module("spark_jobs.stream", args, {FAULT_ENV: f"{point}:{CRASH_BATCH}"}, log, 600)

    # The crash landed where intended.
    want_code, want_txns, want_batches = CRASHES[point]
    assert code == want_code, tail(log)
    assert [v for _, _, v in delta_txns(table)] == want_txns
    assert sorted(set(batches_of(kafka.read_all(results)))) == want_batches
    if point == BEFORE_KAFKA_COMMIT:  # batch 1 is in the log, in an open transaction
        assert CRASH_BATCH in batches_of(kafka.read_all(results, read_committed=False))
    assert (checkpoint / "aggregates" / "offsets" / str(CRASH_BATCH)).exists()
    assert not (checkpoint / "aggregates" / "commits" / str(CRASH_BATCH)).exists()

    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic),
        table=str(table),
        checkpoint=str(checkpoint),
        spec=spec,
        max_offsets_per_trigger=100,
    )
    summary = run_stream(spark, cfg)  # the restart, in this process's Spark session
    assert summary.batch_ids[0] == CRASH_BATCH, "Spark did not replay the interrupted batch"

    versions = [v for _, _, v in delta_txns(table)]
    assert versions == sorted(set(versions)) and len(versions) >= 3, versions
    expected = aggregate(kafka.read_all(topic), WINDOW_MS)
    assert_same_aggregates(read_table(spark, table), expected, RSD)

    # Exactly once in Kafka: every batch Delta holds is there, no (batch, key) written twice,
    # all by the one query, and the last value of each window is the table's.
    records = kafka.read_all(results)
    written = Counter(zip(batches_of(records), (r.key for r in records), strict=True))
    twice = [pair for pair, n in written.items() if n > 1]
    assert not twice, f"{len(twice)} results written twice, e.g. {twice[0]}"
    assert sorted(set(batches_of(records))) == versions
    assert len({r.header(QUERY_HEADER) for r in records}) == 1
    assert latest_windows(records) == read_table(spark, table)
