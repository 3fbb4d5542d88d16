"""Delta writes that can be repeated without effect.

Every streaming write carries a Delta transaction id (``txnAppId`` = the streaming query's id,
``txnVersion`` = the micro-batch id). Delta records the pair in the same commit as the data
and skips a later write whose version is not above the recorded one, so a batch Spark replays
after a crash changes nothing. See docs/spark.md for the whole argument.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from spark_jobs.config import WindowSpec
from spark_jobs.evolution import Shape, added_columns
from spark_jobs.fixed import fixed_spec
from spark_jobs.plan import AggregationPlan
from spark_jobs.spec import AggregationSpec, parse_spec

SHAPE_PROPERTY = "eosbridge.aggregation"  # the spec's shape (see spark_jobs.evolution)
SPEC_PROPERTY = "eosbridge.spec"  # the whole spec, for a backfill given none
_TXN_APP_CONF = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"


@dataclass(slots=True, frozen=True)
class TxnId:
    """A Delta idempotent-write id: at most one commit per (app_id, version), ever rising."""

    app_id: str
    version: int


# Properties of the tables this process has created or described, by path. Creating or
# describing a Delta table costs seconds (a snapshot of its log, a Spark job), and a job used to
# do it up to four times per table before its first micro-batch.
_properties: dict[str, dict[str, str]] = {}


def ensure_table(
    spark: SparkSession, path: str, schema: StructType, properties: dict[str, str] | None = None
) -> dict[str, str]:
    """Create an empty Delta table at ``path`` unless one exists; return its properties.

    An existing table is described once per process and never re-created; the result is
    cached, so later calls for the same path do no Spark work.
    """
    key = path.rstrip("/")
    if key in _properties:
        return _properties[key]
    if DeltaTable.isDeltaTable(spark, path):
        found = _table_properties(spark, path)
    else:
        # createIfNotExists, not create: a concurrent creator of the same table is harmless.
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        for name, value in (properties or {}).items():
            builder = builder.property(name, value)
        builder.execute()
        found = dict(properties or {})
    _properties[key] = found
    return found


def _table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's properties from its metadata alone: SHOW TBLPROPERTIES, not DESCRIBE DETAIL,
    which rebuilds the whole file list to count files and bytes (slower as the table grows)."""
    quoted = path.replace("`", "``")
    rows = spark.sql(f"SHOW TBLPROPERTIES delta.`{quoted}`").collect()
    return {str(row["key"]): str(row["value"]) for row in rows}


def ensure_aggregate_table(spark: SparkSession, path: str, plan: AggregationPlan) -> None:
    """Create the aggregate table for ``plan``, or evolve an existing one to it.

    Raises:
        JobConfigError: the table's rows mean something else under this spec (another window,
            other merge keys, an aggregate redefined, a column type changed); one line.
    """
    schema = StructType(
        [StructField(f.name, f.dataType, nullable=True) for f in plan.output_schema(spark)]
    )
    shape = {**plan.spec.shape(), "columns": {f.name: f.dataType.simpleString() for f in schema}}
    wanted = {
        SHAPE_PROPERTY: json.dumps(shape, sort_keys=True),
        SPEC_PROPERTY: plan.spec.model_dump_json(exclude_defaults=True),
    }
    found = ensure_table(spark, path, schema, wanted)
    if found.get(SHAPE_PROPERTY) == wanted[SHAPE_PROPERTY]:
        return
    added = added_columns(path, _stored_shape(spark, path, found), shape)
    quoted = f"delta.`{path.replace('`', '``')}`"
    if added:
        columns = ", ".join(f"`{name}` {kind}" for name, kind in added.items())
        spark.sql(f"ALTER TABLE {quoted} ADD COLUMNS ({columns})")
    settings = ", ".join(f"'{k}' = '{_sql_string(v)}'" for k, v in wanted.items())
    spark.sql(f"ALTER TABLE {quoted} SET TBLPROPERTIES ({settings})")
    _properties[path.rstrip("/")] = {**found, **wanted}


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _stored_shape(spark: SparkSession, path: str, properties: dict[str, str]) -> Shape:
    """The shape the table records; a table of the fixed job from before specs records only
    its window and distinct accuracy, and its columns are read from its schema."""
    doc = json.loads(properties.get(SHAPE_PROPERTY) or "null")
    if isinstance(doc, dict) and "merge_keys" in doc:
        return doc
    window = (
        WindowSpec()
        if doc is None
        else WindowSpec(doc["window"], "10 minutes", doc["distinct_rsd"])
    )
    columns = spark.read.format("delta").load(path).schema
    return {
        **fixed_spec(window=window).shape(),
        "columns": {f.name: f.dataType.simpleString() for f in columns},
    }


def stored_spec(spark: SparkSession, path: str) -> AggregationSpec | None:
    """The spec the table at ``path`` was last written with (None: no table, or none kept)."""
    key = path.rstrip("/")
    if key not in _properties and not DeltaTable.isDeltaTable(spark, path):
        return None
    properties = ensure_table(spark, path, StructType([]))
    if SPEC_PROPERTY in properties:
        return parse_spec(json.loads(properties[SPEC_PROPERTY]), f"--table {path} (its spec)")
    legacy = properties.get(SHAPE_PROPERTY)
    if legacy is None:
        return None
    doc = json.loads(legacy)
    return fixed_spec(window=WindowSpec(doc["window"], "10 minutes", doc["distinct_rsd"]))


@contextmanager
def _idempotent(spark: SparkSession, txn: TxnId) -> Iterator[None]:
    # MERGE takes the transaction id from the session (DataFrame writes take options).
    spark.conf.set(_TXN_APP_CONF, txn.app_id)
    spark.conf.set(_TXN_VERSION_CONF, str(txn.version))
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP_CONF)
        spark.conf.unset(_TXN_VERSION_CONF)


def upsert_rows(rows: DataFrame, path: str, keys: Sequence[str], txn: TxnId) -> None:
    """Insert or overwrite rows (by their merge ``keys``) with their current full values.

    The rows carry absolute values from the streaming state, never increments, so even a
    write that escaped the transaction id check would not count anything twice. Keys compare
    null-safely (a group whose key is NULL is one row); the table's columns that the rows do
    not carry (an aggregate dropped from the spec) are left as they are.
    """
    spark = rows.sparkSession
    on = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in keys)
    values: dict[str, str | Column] = {f"`{c}`": f"s.`{c}`" for c in rows.columns}
    with _idempotent(spark, txn):
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(rows.alias("s"), on)
            .whenMatchedUpdate(set=values)
            .whenNotMatchedInsert(values=values)
            .execute()
        )


def append_once(rows: DataFrame, path: str, txn: TxnId) -> None:
    """Append ``rows``; a second append with the same ``txn`` is skipped by Delta."""
    (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", txn.app_id)
        .option("txnVersion", str(txn.version))
        .save(path)
    )


def replace_windows(rows: DataFrame, path: str, first_us: int, last_us: int) -> None:
    """Atomically replace every row whose window starts in ``[first_us, last_us]`` by ``rows``.

    Bounds are epoch microseconds, so no time zone sits between Python and the predicate.
    """
    predicate = (
        f"window_start >= timestamp_micros({int(first_us)}) "
        f"AND window_start <= timestamp_micros({int(last_us)})"
    )
    rows.write.format("delta").mode("overwrite").option("replaceWhere", predicate).save(path)


def replace_all(rows: DataFrame, path: str) -> None:
    """Atomically replace the whole table by ``rows`` (running totals recomputed from the start)."""
    rows.write.format("delta").mode("overwrite").save(path)
