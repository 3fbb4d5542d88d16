"""Issue 58, acceptance 1: two spec shapes (a hopping window with several aggregates; a running
total without a window) streamed to an Iceberg table through a real REST catalog over
read_committed input with aborted transactions and malformed rows; the table, read by pyiceberg
through the catalog, equals the plain-Python reference, and each batch is one commit."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from app.kafka.topics import KafkaRecord
from bench.spark_spec import spec_a
from devkit.iceberg.server import LocalRestCatalog
from spark_jobs.config import KafkaSource, StreamConfig
from spark_jobs.spec import AggregationSpec, parse_spec
from spark_jobs.stream import run_stream
from tests.spark.data import first_window_ms
from tests.spark.iceberg_tables import batch_commits, iceberg_rows, rest_reader
from tests.spark.jobs import run_module, tail
from tests.spark.spec_data import (
    BAD_VALUES,
    Click,
    make_clicks,
    reference_a,
    reference_c,
    spec_c,
    tick,
    typed,
)
from tests.spark.test_specs import Topic, produce
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.spark

Reference = Callable[
    [Iterable[KafkaRecord], AggregationSpec], dict[tuple[Any, ...], dict[str, Any]]
]
SPECS: dict[str, tuple[Callable[[str], AggregationSpec], Reference]] = {
    "hopping": (spec_a, reference_a),
    "running_total": (spec_c, reference_c),
}
NAMESPACE = "eos"


@pytest.fixture(scope="module")
def topic(kafka: KafkaFixture) -> Topic:
    name = kafka.create_topic(kafka.unique("spark-iceberg"), partitions=2)
    t0 = first_window_ms()
    clicks = make_clicks(seed=58, t0_ms=t0)
    batches: list[list[Click | bytes]] = [
        list(clicks[i : i + 40]) for i in range(0, len(clicks), 40)
    ]
    batches[1] = [*batches[1], *BAD_VALUES]
    batches.append([tick(clicks[-1].ts)])
    produce(kafka, name, batches)  # transactions 2 and 5 aborted
    return Topic(name, t0, kafka.read_all(name))


def to_iceberg(spec: AggregationSpec, catalog: LocalRestCatalog, table: str) -> AggregationSpec:
    """``spec`` with ``output.iceberg``: ``table`` in the test namespace of ``catalog``."""
    doc = spec.model_dump(exclude_none=True)
    doc["output"] = {"iceberg": {"uri": catalog.uri, "namespace": NAMESPACE, "table": table}}
    return parse_spec(doc)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_streamed_spec_to_iceberg_equals_the_plain_python_reference(
    spark: SparkSession,
    kafka: KafkaFixture,
    rest_catalog: LocalRestCatalog,
    topic: Topic,
    tmp_path: Path,
    name: str,
) -> None:
    make_spec, reference = SPECS[name]
    reader = rest_reader(rest_catalog.uri)
    reader.create_namespace_if_not_exists(NAMESPACE)
    spec = to_iceberg(make_spec(topic.name), rest_catalog, f"spec_{name}")
    want = reference(topic.records, spec)
    assert len(want) >= 4
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic.name),
        table=str(tmp_path / "table"),
        checkpoint=str(tmp_path / "checkpoint"),
        max_offsets_per_trigger=120,  # several micro-batches: rows are updated in place
        spec=spec,
    )
    summary = run_stream(spark, cfg)
    assert len(summary.batch_ids) >= 2

    table = reader.load_table(f"{NAMESPACE}.spec_{name}")
    assert iceberg_rows(table, spec) == want

    commits = batch_commits(table)
    assert commits and set(commits.values()) == {1}, commits
    assert len(commits) >= 2, "rows were never updated by a later batch"

    bad = spark.read.format("delta").load(cfg.bad_table).collect()
    expected_bad = {(r.partition, r.offset) for r in topic.records if typed(r.value, spec) is None}
    assert {(b.partition, b.offset) for b in bad} == expected_bad and len(expected_bad) >= 2


CRASHES = (("after_commit", 1), ("before_commit", 2), ("after_commit", 3), ("before_commit", 4))
SIGKILLED = -9


@pytest.mark.chaos
@pytest.mark.long_spark  # ~10 minutes: make test-long-spark, not make test
def test_driver_sigkilled_around_the_catalog_commit_commits_each_batch_once(
    spark: SparkSession,
    kafka: KafkaFixture,
    rest_catalog: LocalRestCatalog,
    topic: Topic,
    tmp_path: Path,
) -> None:
    reader = rest_reader(rest_catalog.uri)
    reader.create_namespace_if_not_exists(NAMESPACE)
    running_total = parse_spec({**spec_c(topic.name).model_dump(), "bad_records": False})
    spec = to_iceberg(running_total, rest_catalog, "crashed")  # one streaming query, not two
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json(exclude_none=True))
    cfg = StreamConfig(
        source=KafkaSource(kafka.bootstrap, topic.name),
        table=str(tmp_path / "table"),
        checkpoint=str(tmp_path / "checkpoint"),
        max_offsets_per_trigger=50,  # ~7 micro-batches: the crashes land in the middle
        spec=spec,
    )
    args = [
        "--spec", str(spec_file), "--bootstrap", kafka.bootstrap, "--topic", topic.name,
        "--table", cfg.table, "--checkpoint", cfg.checkpoint, "--max-offsets-per-trigger", "50",
    ]  # fmt: skip
    for point, batch in CRASHES:
        log = tmp_path / f"crash-{point}-{batch}.log"
        code = run_module("tests.spark.iceberg_launcher", [point, str(batch), *args], {}, log, 600)
        assert code == SIGKILLED, tail(log)
        commits = batch_commits(reader.load_table(f"{NAMESPACE}.crashed"))
        assert set(commits.values()) == {1}, f"a replayed batch was committed again: {commits}"
        ids = [b for _, b in commits]
        # The crash landed where intended: the batch is in the table after its commit only.
        assert (batch in ids) == (point == "after_commit"), (point, batch, ids)

    summary = run_stream(spark, cfg)
    assert summary.batch_ids[0] == CRASHES[-1][1], "Spark did not replay the interrupted batch"

    table = reader.load_table(f"{NAMESPACE}.crashed")
    assert iceberg_rows(table, spec) == reference_c(topic.records, spec)
    commits = batch_commits(table)
    assert len({query for query, _ in commits}) == 1, "the restarted query must keep its id"
    assert set(commits.values()) == {1}, f"a batch was committed twice: {commits}"
    assert sorted(b for _, b in commits) == list(range(len(commits)))
