"""Delta writes that can be repeated without effect.

Every streaming write carries a Delta transaction id (``txnAppId`` = the streaming query's id,
``txnVersion`` = the micro-batch id). Delta records the pair in the same commit as the data
and skips a later write whose version is not above the recorded one, so a batch Spark replays
after a crash changes nothing. See docs/spark.md for the whole argument.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_jobs.aggregate import AGGREGATE_SCHEMA, MERGE_KEYS
from spark_jobs.errors import JobConfigError

SPEC_PROPERTY = "eosbridge.aggregation"
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


def ensure_aggregate_table(spark: SparkSession, path: str, spec_property: str) -> None:
    """Create the aggregate table, or check an existing one was made with the same spec.

    Raises:
        JobConfigError: the table holds windows of another size (or another distinct
            accuracy); mixing them would make rows incomparable.
    """
    stored = ensure_table(spark, path, AGGREGATE_SCHEMA, {SPEC_PROPERTY: spec_property}).get(
        SPEC_PROPERTY
    )
    if stored is not None and stored != spec_property:
        raise JobConfigError(
            f"--table {path} was created with {stored}, this run asks for {spec_property}; "
            "use the same --window/--distinct-rsd or a new --table"
        )


def table_property(spark: SparkSession, path: str, name: str) -> str | None:
    """One table property of the Delta table at ``path`` (None when unset or no table)."""
    key = path.rstrip("/")
    if key not in _properties and not DeltaTable.isDeltaTable(spark, path):
        return None
    return ensure_table(spark, path, AGGREGATE_SCHEMA).get(name)


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


def upsert_windows(rows: DataFrame, path: str, txn: TxnId) -> None:
    """Insert or overwrite (key, window_start) rows with their current full values.

    The rows carry absolute values from the streaming state, never increments, so even a
    write that escaped the transaction id check would not count anything twice.
    """
    spark = rows.sparkSession
    on = " AND ".join(f"t.{c} = s.{c}" for c in MERGE_KEYS)
    with _idempotent(spark, txn):
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(rows.alias("s"), on)
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
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
