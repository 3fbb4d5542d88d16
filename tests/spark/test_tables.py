"""Table creation and description at start: once per table, cached, and still checked; a
changed spec evolves the table or is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs import tables
from spark_jobs.config import WindowSpec
from spark_jobs.errors import JobConfigError
from spark_jobs.fixed import fixed_spec
from spark_jobs.plan import AggregationPlan
from spark_jobs.spec import Aggregate

pytestmark = pytest.mark.spark


def _plan(window: str = "1 minute") -> AggregationPlan:
    return AggregationPlan.compile(fixed_spec(window=WindowSpec(window)))


def _versions(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "_delta_log").glob("*.json"))


def test_existing_table_is_described_not_recreated_and_its_spec_checked(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "table")
    minute = _plan()
    assert tables.stored_spec(spark, path) is None
    assert not Path(path).exists()  # looking does not create

    tables.ensure_aggregate_table(spark, path, minute)
    monkeypatch.setattr(tables, "_properties", {})  # as a new process would find it

    assert tables.stored_spec(spark, path) == minute.spec
    tables.ensure_aggregate_table(spark, path, minute)  # same spec: fine, from the cache
    with pytest.raises(JobConfigError, match="was created with window"):
        tables.ensure_aggregate_table(spark, path, _plan("5 minutes"))
    assert _versions(tmp_path / "table") == ["00000000000000000000.json"]  # never written again


def test_an_added_aggregate_adds_its_column_and_a_removed_merge_key_is_refused(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "table")
    before = _plan()
    tables.ensure_aggregate_table(spark, path, before)
    monkeypatch.setattr(tables, "_properties", {})

    more = [*before.spec.aggregates, Aggregate(name="amount_max", fn="max", column="amount")]
    after = AggregationPlan.compile(before.spec.model_copy(update={"aggregates": more}))
    tables.ensure_aggregate_table(spark, path, after)
    columns = spark.read.format("delta").load(path).schema
    assert columns["amount_max"].dataType.simpleString() == "double"
    monkeypatch.setattr(tables, "_properties", {})
    assert tables.stored_spec(spark, path) == after.spec

    keyless = after.spec.model_copy(update={"group_by": []})
    with pytest.raises(JobConfigError, match="removes merge key 'key'") as refused:
        tables.ensure_aggregate_table(spark, path, AggregationPlan(keyless))
    assert "\n" not in str(refused.value)
