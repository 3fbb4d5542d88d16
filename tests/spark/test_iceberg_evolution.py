"""Issue 58, acceptance 4: an added aggregate evolves the Iceberg table (through the real REST
catalog); a removed merge key is refused in one line. No Spark session: the sink's table is
created and evolved from the plan's schema and shape alone."""

from __future__ import annotations

import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from devkit.iceberg.server import LocalRestCatalog
from spark_jobs.errors import JobConfigError
from spark_jobs.evolution import Shape
from spark_jobs.iceberg.settings import IcebergTarget
from spark_jobs.iceberg.sink import IcebergSink
from spark_jobs.iceberg_output import IcebergOutput
from spark_jobs.spec import AggregationSpec, parse_spec
from tests.spark.iceberg_tables import rest_reader
from tests.spark.spec_data import spec_c

pytestmark = pytest.mark.spark

TOTAL = StructField("total", DoubleType())
BIGGEST = StructField("biggest", DoubleType())


def _open(catalog: LocalRestCatalog, spec: AggregationSpec, schema: StructType) -> None:
    columns = {f.name: f.dataType.simpleString() for f in schema}
    shape: Shape = {**spec.shape(), "columns": columns}
    out = IcebergOutput(uri=catalog.uri, namespace="evolve", table="totals")
    IcebergSink(IcebergTarget.of(out), spec.merge_keys).open(schema, shape)


def test_an_added_aggregate_evolves_the_table_and_a_removed_merge_key_is_refused(
    rest_catalog: LocalRestCatalog,
) -> None:
    reader = rest_reader(rest_catalog.uri)
    reader.create_namespace_if_not_exists("evolve")
    two_keys = spec_c("t").model_dump(exclude_none=True)
    before = parse_spec({**two_keys, "group_by": ["user", "amount"]})
    keys = [StructField("user", StringType()), StructField("amount", DoubleType())]
    n = StructField("n", LongType())
    _open(rest_catalog, before, StructType([*keys, TOTAL, n]))
    assert "biggest" not in reader.load_table("evolve.totals").schema().column_names

    doc = before.model_dump(exclude_none=True)
    biggest = {"name": "biggest", "fn": "max", "column": "amount"}
    after = parse_spec({**doc, "aggregates": [*doc["aggregates"], biggest]})
    _open(rest_catalog, after, StructType([*keys, TOTAL, n, BIGGEST]))
    assert "biggest" in reader.load_table("evolve.totals").schema().column_names

    no_key = parse_spec({**doc, "group_by": ["user"]})
    with pytest.raises(JobConfigError) as refused:
        _open(rest_catalog, no_key, StructType([keys[0], TOTAL, n]))
    message = str(refused.value)
    assert "removes merge key 'amount'" in message and "\n" not in message
