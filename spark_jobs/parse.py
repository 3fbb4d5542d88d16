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
        # The same text as a JSON object of raw field texts: NULL exactly when the value is not
        # a JSON object, and a field's entry tells "absent or null" from "present, wrong type".
        F.from_json(value, _RAW_OBJECT).alias("raw"),
    ).withColumn("error", _error(F.col("r"), F.col("raw"), fields))
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


# Every value of an object as its JSON text (Spark renders any token as a string field).
_RAW_OBJECT = "map<string,string>"


def _error(record: Column, raw: Column, fields: RecordFields) -> Column:
    """Why a row cannot be aggregated, or NULL when it can.

    Since Spark 3.0 ``from_json`` turns malformed text into a struct of NULL fields rather than
    NULL, so the typed struct alone cannot tell malformed JSON from a wrong type. ``raw`` (the
    object as a map) is NULL for anything that is not a JSON object, and ``get_json_object``
    then separates valid non-object JSON (``42``, ``[1]``, ``null``) from text that is not JSON.
    """
    names = (fields.id, fields.key, fields.amount, fields.ts)
    missing = F.concat_ws(
        ", ", *[F.when(raw.getItem(name).isNull(), F.lit(name)) for name in names]
    )
    mistyped = F.concat_ws(
        ", ",
        *[
            F.when(raw.getItem(name).isNotNull() & record.getField(name).isNull(), F.lit(name))
            for name in names
        ],
    )
    amount = record.getField(fields.amount)
    ts = record.getField(fields.ts)
    return (
        F.when(F.col("value").isNull(), F.lit("null value"))
        .when(
            raw.isNull() & F.get_json_object(F.col("value"), "$").isNotNull(),
            F.lit("not a JSON object"),
        )
        .when(raw.isNull(), F.lit("malformed JSON"))
        .when(
            (missing != "") | (mistyped != ""),
            F.concat_ws(
                "; ",
                F.when(missing != "", F.concat(F.lit("missing: "), missing)),
                F.when(mistyped != "", F.concat(F.lit("wrong type: "), mistyped)),
            ),
        )
        .when(F.isnan(amount) | (F.abs(amount) == float("inf")), F.lit("amount is not finite"))
        .when((ts < 0) | (ts > MAX_TS_MS), F.lit("ts out of range"))
    )
