"""Acceptance 1, 3 and 4 of issue 31: three aggregation specs, each streamed over the same
read_committed records (aborted transactions, malformed rows) and compared with a plain-Python
reference; a backfill over an offset range reproduces the stream's rows; an added aggregate
evolves the table."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from app.kafka.topics import KafkaRecord
from bench.spark_spec import spec_a
from spark_jobs.backfill import run_backfill
from spark_jobs.config import BackfillConfig, KafkaRange, KafkaSource, StreamConfig
from spark_jobs.errors import JobConfigError
from spark_jobs.spec import AggregationSpec, parse_spec
from spark_jobs.stream import StreamSummary, run_stream, start_stream, wait_for
from tests.spark.data import first_window_ms
from tests.spark.spec_data import (
    BAD_VALUES,
    Click,
    make_clicks,
    phase_bounds,
    reference_a,
    reference_b,
    reference_c,
    spec_b,
    spec_c,
    tick,
    typed,
)
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.spark

Reference = Callable[
    [Iterable[KafkaRecord], AggregationSpec], dict[tuple[Any, ...], dict[str, Any]]
]
SPECS: dict[str, tuple[Callable[[str], AggregationSpec], Reference]] = {
    "a": (spec_a, reference_a),
    "b": (spec_b, reference_b),
    "c": (spec_c, reference_c),
}
ABORTED = frozenset({2, 5})


@dataclass(slots=True, frozen=True)
class Topic:
    name: str
    t0_ms: int
    records: list[KafkaRecord]  # read back read_committed


def produce(kafka: KafkaFixture, topic: str, batches: list[list[Click | bytes]]) -> None:
    """One transaction per batch, the ``ABORTED`` ones aborted after reaching the log."""
    producer = kafka.transactional_producer()
    for index, batch in enumerate(batches):
        producer.begin_transaction()
        for item in batch:
            if isinstance(item, Click):
                producer.produce(topic, item.value(), key=item.user.encode(), timestamp=item.ts)
            else:
                producer.produce(topic, item, key=b"bad")
        producer.flush(30)
        if index in ABORTED:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    wait_until(
        lambda: kafka.end_offsets(topic, True) == kafka.end_offsets(topic, False),
        30,
        f"the last stable offset of {topic} to reach its high watermark",
    )


@pytest.fixture(scope="module")
def topic(kafka: KafkaFixture) -> Topic:
    name = kafka.create_topic(kafka.unique("spark-specs"), partitions=2)
    t0 = first_window_ms()
    clicks = make_clicks(seed=31, t0_ms=t0)
    batches: list[list[Click | bytes]] = [
        list(clicks[i : i + 40]) for i in range(0, len(clicks), 40)
    ]
    batches[1] = [*batches[1], *BAD_VALUES]
    batches.append([tick(clicks[-1].ts)])
    produce(kafka, name, batches)
    records = kafka.read_all(name)
    assert len(records) == len(clicks) - 80 + len(BAD_VALUES) + 1  # two aborted batches of 40
    return Topic(name, t0, records)


def read_rows(
    spark: SparkSession, path: Path, spec: AggregationSpec
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table as merge key → other columns, times in epoch ms; a duplicate key fails."""
    frame = spark.read.format("delta").load(str(path))
    for column in ("window_start", "window_end"):
        if column in frame.columns:
            frame = frame.withColumn(column, F.unix_millis(column))
    rows = {}
    for row in frame.collect():
        values = row.asDict()
        key = tuple(values.pop(k) for k in spec.merge_keys)
        assert key not in rows, f"duplicate row for {key}"
        rows[key] = values
    return rows


def stream(
    spark: SparkSession,
    kafka: KafkaFixture,
    spec: AggregationSpec,
    work: Path,
    rows: int,
    table: Path | None = None,
) -> Path:
    """Run the streaming job over the topic; return its table.

    Session windows are emitted once closed, i.e. in the batch *after* the one whose records
    moved the watermark past them: an available-now run stops before that batch. So a session
    spec runs with an interval trigger until its table holds the expected number of rows
    (the comparison that follows checks them all), then stops.
    """
    session = spec.window is not None and spec.window.type == "session"
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, ",".join(spec.input.topics)),
        table=str(table or work / "table"),
        checkpoint=str(work / "checkpoint"),
        max_offsets_per_trigger=120,  # several micro-batches: rows are updated in place
        spec=spec,
        trigger="1 second" if session else "available-now",
    )
    if not session:
        summary = run_stream(spark, cfg)
    else:
        stop = threading.Event()
        summaries: list[StreamSummary] = []
        runner = threading.Thread(target=lambda: summaries.append(run_stream(spark, cfg, stop)))
        runner.start()
        try:
            wait_until(
                lambda: _row_count(spark, cfg.table) >= rows or not runner.is_alive(),
                600,
                f"{rows} sessions",
                step=5,
            )
        finally:
            stop.set()
            runner.join(120)
        assert summaries, "the streaming job failed (see the log)"
        summary = summaries[0]
    assert len(summary.batch_ids) >= 2
    assert summary.late_rows_dropped == 0
    return Path(cfg.table)


def _row_count(spark: SparkSession, table: str) -> int:
    if not Path(table, "_delta_log").exists():
        return 0
    return spark.read.format("delta").load(table).count()


@pytest.mark.parametrize("name", sorted(SPECS))
def test_streamed_spec_equals_plain_python_reference_and_backfill_equals_stream(
    spark: SparkSession, kafka: KafkaFixture, topic: Topic, tmp_path: Path, name: str
) -> None:
    make_spec, reference = SPECS[name]
    spec = make_spec(topic.name)
    want = reference(topic.records, spec)
    assert len(want) >= 4
    table = stream(spark, kafka, spec, tmp_path, len(want))

    streamed = read_rows(spark, table, spec)
    assert streamed == want

    bad = spark.read.format("delta").load(f"{table}_bad_records").collect()
    expected_bad = {(r.partition, r.offset) for r in topic.records if typed(r.value, spec) is None}
    assert {(b.partition, b.offset) for b in bad} == expected_bad
    assert len(expected_bad) >= 2 and all(b.error for b in bad)

    damaged = _damage_and_backfill(spark, kafka, topic, spec, table)
    assert damaged >= 2
    assert read_rows(spark, table, spec) == streamed


def _damage_and_backfill(
    spark: SparkSession, kafka: KafkaFixture, topic: Topic, spec: AggregationSpec, table: Path
) -> int:
    """Delete the rows the backfill of phase 2 (or, without a window, of everything) must
    recompute, run it, and return how many rows were deleted."""
    start, end = phase_bounds(topic.t0_ms, 1)
    if spec.window is None:
        where, kafka_range = "user IN ('ana', 'bo')", KafkaRange("earliest", "latest")
    else:
        where = f"window_start >= timestamp_millis({start})"
        if spec.window.type == "hopping":
            where += f" AND window_end <= timestamp_millis({end})"
        kafka_range = phase_offsets(topic.records, topic.name, start, end)
    path = f"delta.`{table}`"
    damaged = spark.read.format("delta").load(str(table)).where(where).count()
    spark.sql(f"DELETE FROM {path} WHERE {where}")
    cfg = BackfillConfig(
        KafkaSource(kafka.bootstrap, topic.name), str(table), kafka_range, spec=spec
    )
    summary = run_backfill(spark, cfg)
    assert summary.windows_written >= damaged
    return damaged


def phase_offsets(records: list[KafkaRecord], topic: str, first_ms: int, end_ms: int) -> KafkaRange:
    """Per-partition offsets spanning exactly the records whose ``ts`` is in [first, end)."""
    start: dict[str, int] = {}
    stop: dict[str, int] = {}
    for r in records:
        try:
            ts = json.loads(r.value or b"null").get("ts")
        except (ValueError, AttributeError):
            continue
        if isinstance(ts, int) and first_ms <= ts < end_ms:
            p = str(r.partition)
            start[p] = min(start.get(p, r.offset), r.offset)
            stop[p] = max(stop.get(p, r.offset + 1), r.offset + 1)
    return KafkaRange(json.dumps({topic: start}), json.dumps({topic: stop}))


def test_an_added_aggregate_evolves_the_streamed_table_and_needs_a_new_checkpoint(
    spark: SparkSession, kafka: KafkaFixture, topic: Topic, tmp_path: Path
) -> None:
    before = spec_c(topic.name)
    want = reference_c(topic.records, before)
    table = stream(spark, kafka, before, tmp_path / "first", len(want))
    assert "biggest" not in spark.read.format("delta").load(str(table)).columns

    biggest = {"name": "biggest", "fn": "max", "column": "amount"}
    after = parse_spec({**before.model_dump(exclude_none=True), "aggregates": [
        *before.model_dump()["aggregates"], biggest,
    ]})  # fmt: skip
    with pytest.raises(JobConfigError, match="holds the state of another spec"):
        stream(spark, kafka, after, tmp_path / "first", len(want), table)
    stream(spark, kafka, after, tmp_path / "second", len(want), table)

    maxima: dict[str, float] = {}
    for r in topic.records:
        d = typed(r.value, after)
        if d is not None:
            maxima[d["user"]] = max(maxima.get(d["user"], d["amount"]), d["amount"])
    evolved = {k: {**v, "biggest": maxima[k[0]]} for k, v in want.items()}
    assert read_rows(spark, table, after) == evolved


def test_bad_records_false_starts_no_second_query_and_counts_the_dropped_rows(
    spark: SparkSession, kafka: KafkaFixture, topic: Topic, tmp_path: Path
) -> None:
    spec = parse_spec({**spec_c(topic.name).model_dump(exclude_none=True), "bad_records": False})
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic.name),
        table=str(tmp_path / "table"),
        checkpoint=str(tmp_path / "checkpoint"),
        max_offsets_per_trigger=120,
        spec=spec,
    )
    running = start_stream(spark, cfg)
    assert running.bad_records is None and len(running.queries) == 1
    summary = wait_for(running)

    assert read_rows(spark, Path(cfg.table), spec) == reference_c(topic.records, spec)
    assert not Path(cfg.bad_table).exists()
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir() if p.is_dir()) == [
        "aggregates"
    ]
    bad = [r for r in topic.records if typed(r.value, spec) is None]
    assert len(bad) >= 2 and summary.bad_records == len(bad)
