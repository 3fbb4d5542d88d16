"""Table creation and description at start: once per table, cached, and still checked."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs import tables
from spark_jobs.config import WindowSpec
from spark_jobs.errors import JobConfigError

pytestmark = pytest.mark.spark


def test_existing_table_is_described_not_recreated_and_its_spec_checked(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "table")
    minute = WindowSpec("1 minute").table_property()
    assert tables.table_property(spark, path, tables.SPEC_PROPERTY) is None
    assert not Path(path).exists()  # looking does not create

    tables.ensure_aggregate_table(spark, path, minute)
    monkeypatch.setattr(tables, "_properties", {})  # as a new process would find it

    assert tables.table_property(spark, path, tables.SPEC_PROPERTY) == minute
    tables.ensure_aggregate_table(spark, path, minute)  # same spec: fine, from the cache
    with pytest.raises(JobConfigError, match="was created with"):
        tables.ensure_aggregate_table(spark, path, WindowSpec("5 minutes").table_property())
    versions = sorted(p.name for p in (tmp_path / "table" / "_delta_log").glob("*.json"))
    assert versions == ["00000000000000000000.json"]  # created once, never written again
