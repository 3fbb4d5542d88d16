"""Kafka rows → typed records, and the rows that cannot be typed, with the reason.

Nothing is dropped here: every input row lands in exactly one of ``good`` and ``bad``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.config import RecordFields

# Event times outside [1970, 9999] cannot be a Spark timestamp; such rows are bad, not fatal.
MAX_TS_MS = 253_402_300_799_999


# Rows that could not be aggregated, kept with where they came from and why.
BAD_RECORD_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("kafka_timestamp", TimestampType()),
        StructField("kafka_key", StringType()),
        StructField("value", StringType()),
        StructField("error", StringType()),
    ]
)


def record_schema(fields: RecordFields) -> StructType:
    """The declared JSON schema of one output record (other fields are ignored)."""
    return StructType(
        [
            StructField(fields.id, StringType()),
            StructField(fields.key, StringType()),
            StructField(fields.amount, DoubleType()),
            StructField(fields.ts, LongType()),
        ]
    )


@dataclass(slots=True, frozen=True)
class ParsedRecords:
    """``good``: key, id, amount, event_time. ``bad``: the raw row, where it was, and why."""

    good: DataFrame
    bad: DataFrame


def parse_records(raw: DataFrame, fields: RecordFields) -> ParsedRecords:
    """Split Kafka rows (``key``, ``value``, ``topic``, ...) into typed and rejected records."""
    value = F.col("value").cast("string")
    checked = raw.select(
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("kafka_key"),
        value.alias("value"),
        F.from_json(value, record_schema(fields)).alias("r"),
    ).withColumn("error", _error(F.col("r"), fields))
    record = F.col("r")
    good = checked.where(F.col("error").isNull()).select(
        record.getField(fields.key).alias("key"),
        record.getField(fields.id).alias("id"),
        record.getField(fields.amount).alias("amount"),
        F.timestamp_millis(record.getField(fields.ts)).alias("event_time"),
    )
    bad = checked.where(F.col("error").isNotNull()).select(
        "topic", "partition", "offset", "kafka_timestamp", "kafka_key", "value", "error"
    )
    return ParsedRecords(good=good, bad=bad)


def _error(record: Column, fields: RecordFields) -> Column:
    """Why a row cannot be aggregated, or NULL when it can."""
    missing = F.concat_ws(
        ", ",
        *[
            F.when(record.getField(name).isNull(), F.lit(name))
            for name in (fields.id, fields.key, fields.amount, fields.ts)
        ],
    )
    amount = record.getField(fields.amount)
    ts = record.getField(fields.ts)
    return (
        F.when(F.col("value").isNull(), F.lit("null value"))
        .when(record.isNull(), F.lit("not a JSON object"))
        .when(missing != "", F.concat(F.lit("missing or mistyped: "), missing))
        .when(F.isnan(amount) | (F.abs(amount) == float("inf")), F.lit("amount is not finite"))
        .when((ts < 0) | (ts > MAX_TS_MS), F.lit("ts out of range"))
    )
