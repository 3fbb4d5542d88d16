"""Reading the bridge's output topic, always with ``read_committed``.

Spark's Kafka source defaults to ``read_uncommitted``; the bridge aborts transactions on
errors and rebalances, so a default reader would count records that were never committed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.config import KafkaRange, KafkaSource


def reader_options(source: KafkaSource) -> dict[str, str]:
    """Options common to streaming and batch reads of ``source``."""
    return {
        "kafka.bootstrap.servers": source.bootstrap,
        "subscribe": source.topic,
        "kafka.isolation.level": source.isolation_level,
        # Offsets deleted by retention before we read them must stop the job, not vanish.
        "failOnDataLoss": "true",
        **dict(source.options),
    }


def read_stream(
    spark: SparkSession,
    source: KafkaSource,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
) -> DataFrame:
    """The topic as a streaming DataFrame with Spark's Kafka columns."""
    options = {**reader_options(source), "startingOffsets": starting_offsets}
    if max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    return spark.readStream.format("kafka").options(**options).load()


def read_range(spark: SparkSession, source: KafkaSource, kafka_range: KafkaRange) -> DataFrame:
    """A bounded slice of the topic as a batch DataFrame."""
    options = {**reader_options(source), **kafka_range.reader_options()}
    return spark.read.format("kafka").options(**options).load()
