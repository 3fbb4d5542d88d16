"""The per-key, per-window statistics; shared by the streaming and the backfill job.

One definition for both jobs is what makes "backfill over a range equals the stream" hold.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.config import WindowSpec

PERCENTILES = (0.5, 0.95, 0.99)
# Spark's default; with fewer rows per group than this every sample is kept, so exact.
PERCENTILE_ACCURACY = 10_000

AGGREGATE_SCHEMA = StructType(
    [
        StructField("key", StringType(), nullable=False),
        StructField("window_start", TimestampType(), nullable=False),
        StructField("window_end", TimestampType(), nullable=False),
        StructField("record_count", LongType(), nullable=False),
        StructField("amount_sum", DoubleType()),
        StructField("distinct_ids", LongType()),
        StructField("amount_p50", DoubleType()),
        StructField("amount_p95", DoubleType()),
        StructField("amount_p99", DoubleType()),
    ]
)
MERGE_KEYS = ("key", "window_start")


def aggregate_windows(records: DataFrame, spec: WindowSpec) -> DataFrame:
    """Group typed records (key, id, amount, event_time) by key and tumbling window.

    The caller adds the watermark for streaming input; for batch input there is none.
    """
    pct = F.percentile_approx("amount", list(PERCENTILES), PERCENTILE_ACCURACY)
    grouped = records.groupBy(F.col("key"), F.window("event_time", spec.size).alias("w")).agg(
        F.count(F.lit(1)).alias("record_count"),
        F.sum("amount").alias("amount_sum"),
        F.approx_count_distinct("id", spec.distinct_rsd).alias("distinct_ids"),
        pct.alias("pct"),
    )
    return grouped.select(
        "key",
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        "record_count",
        "amount_sum",
        "distinct_ids",
        F.col("pct")[0].alias("amount_p50"),
        F.col("pct")[1].alias("amount_p95"),
        F.col("pct")[2].alias("amount_p99"),
    )
