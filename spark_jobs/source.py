"""Reading the bridge's output topic, always with ``read_committed``; Avro values behind a
Schema Registry are decoded here (:mod:`spark_jobs.avro_input`).

Spark's Kafka source defaults to ``read_uncommitted``; the bridge aborts transactions on
errors and rebalances, so a default reader would count records that were never committed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.avro_input import decode_values, fetch_schemas
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
    return decoded(source, spark.readStream.format("kafka").options(**options).load())


def read_range(spark: SparkSession, source: KafkaSource, kafka_range: KafkaRange) -> DataFrame:
    """A bounded slice of the topic as a batch DataFrame."""
    options = {**reader_options(source), **kafka_range.reader_options()}
    return decoded(source, spark.read.format("kafka").options(**options).load())


def decoded(source: KafkaSource, raw: DataFrame) -> DataFrame:
    """``raw`` itself for JSON values; for a registry source, the Avro values decoded to JSON
    text beside a ``decode_error`` column (:mod:`spark_jobs.avro_input`)."""
    if source.registry is None:
        return raw
    return decode_values(raw, fetch_schemas(source.registry, source.topic_names))


def check_registry(source: KafkaSource) -> None:
    """Before Spark starts: the registry answers with the topics' Avro schemas (exit 2 or 3
    in one line otherwise, without a JVM start-up first)."""
    if source.registry is not None:
        fetch_schemas(source.registry, source.topic_names)
