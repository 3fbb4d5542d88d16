"""Issue 31, acceptance 2: the streaming job's driver is SIGKILLed before and after the Delta
commit and before and after the Kafka results commit of a micro-batch; after the restart the
table equals the reference and a read_committed reader of the results topic sees each
batch's results exactly once.

One chain of drivers over one topic, table and checkpoint: the first is killed at the first
fault point in batch 1, the driver started after it (replaying batch 1) at the second in batch
2, and so on; the last restart runs to the end. Every replay after every fault point must be
written once, in Delta and in Kafka.

``make test`` runs the chain of the two Kafka points (a batch in Delta and in an open
transaction of the results topic; a batch committed to both, not to the checkpoint); a crash
after the Delta write is CI's in tests/spark/test_crash_restart.py; the whole chain of four
runs in ``make test-long-spark``."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.kafka.topics import KafkaRecord
from spark_jobs.config import WindowSpec
from spark_jobs.faults import (
    AFTER_DELTA_WRITE,
    AFTER_KAFKA_COMMIT,
    BEFORE_DELTA_WRITE,
    BEFORE_KAFKA_COMMIT,
)
from spark_jobs.fixed import fixed_spec
from spark_jobs.results import BATCH_HEADER, QUERY_HEADER
from spark_jobs.spec import AggregationSpec, parse_spec
from tests.spark.crashes import RSD, SIGKILLED, CrashingJob, seeded_topic
from tests.spark.faulty_stream import FAULT_EXIT_CODE
from tests.spark.reference import WindowKey, WindowStats
from tests.spark.tables import delta_txns, read_table
from tests.support.kafka import KafkaFixture

# Four driver processes and a restart in one test: a hang guard above the suite's 900 s default,
# which a run at load average 30 on 2 cores went past; not a speed requirement.
pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(2400)]

# The fault points in the order the chain meets them, the n-th in batch n: point → (exit code,
# whether Delta holds the crashed batch, whether the committed results topic holds it).
CHAIN = {
    BEFORE_DELTA_WRITE: (SIGKILLED, False, False),
    AFTER_DELTA_WRITE: (FAULT_EXIT_CODE, True, False),
    BEFORE_KAFKA_COMMIT: (SIGKILLED, True, False),
    AFTER_KAFKA_COMMIT: (SIGKILLED, True, True),
}
# The Kafka results' own points, in the order the chain meets them.
KAFKA_CHAIN = {point: CHAIN[point] for point in (BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT)}
# 100 offsets a batch: batches 0-5 full, so each point falls in a batch with rows and the
# final restart has more than the replayed batch to do.
EVENTS = 600


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


@pytest.mark.parametrize(
    "chain",
    [
        pytest.param(KAFKA_CHAIN, id="kafka-points"),
        pytest.param(CHAIN, id="all-points", marks=pytest.mark.long_spark),
    ],
)
def test_driver_killed_around_the_delta_and_kafka_commits_writes_each_batch_once(
    spark: SparkSession,
    kafka: KafkaFixture,
    tmp_path: Path,
    chain: dict[str, tuple[int, bool, bool]],
) -> None:
    topic = seeded_topic(kafka, "spark-kres-in", seed=7, events=EVENTS)
    results = kafka.create_topic(kafka.unique("spark-kres-out"), partitions=2)
    kafka.create_topic(f"{results}.batches", config={"cleanup.policy": "compact"})
    spec = results_spec(kafka.unique("kres"), results)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    job = CrashingJob(kafka, topic, tmp_path, ["--spec", str(spec_file)])

    for batch, (point, (exit_code, in_delta, in_kafka)) in enumerate(chain.items(), start=1):
        job.crash(point, batch, exit_code)
        # The crash landed where intended, and every batch before it is in both, once.
        in_results = sorted(set(batches_of(kafka.read_all(results))))
        assert [v for _, _, v in delta_txns(job.table)] == list(range(batch + in_delta)), point
        assert in_results == list(range(batch + in_kafka)), point
        if point == BEFORE_KAFKA_COMMIT:  # the batch is in the log, in an open transaction
            assert batch in batches_of(kafka.read_all(results, read_committed=False))

    job.restart(spark, spec=spec)
    versions = [v for _, _, v in delta_txns(job.table)]
    assert versions == sorted(set(versions)) and len(versions) > len(chain), versions
    job.assert_table_is_reference(spark)

    # Exactly once in Kafka: every batch Delta holds is there, no (batch, key) written twice,
    # all by the one query, and the last value of each window is the table's.
    records = kafka.read_all(results)
    written = Counter(zip(batches_of(records), (r.key for r in records), strict=True))
    twice = [pair for pair, n in written.items() if n > 1]
    assert not twice, f"{len(twice)} results written twice, e.g. {twice[0]}"
    assert sorted(set(batches_of(records))) == versions
    assert len({r.header(QUERY_HEADER) for r in records}) == 1
    assert latest_windows(records) == read_table(spark, job.table)
