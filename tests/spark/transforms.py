"""A user's Python-form aggregation, loaded by ``module:function`` in the tests."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def biggest_per_user(records: DataFrame) -> DataFrame:
    """Per user: the biggest amount and how many records."""
    return records.groupBy("user").agg(
        F.max("amount").alias("biggest"), F.count(F.lit(1)).alias("n")
    )


def not_a_frame(records: DataFrame) -> int:
    return 42
