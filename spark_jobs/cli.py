"""Command-line options the jobs share, and turning them into config objects."""

from __future__ import annotations

import argparse
import logging
import os

from pyspark.sql import SparkSession

from spark_jobs.config import KafkaSource, RecordFields
from spark_jobs.errors import JobConfigError
from spark_jobs.security import security_options


def add_source_args(parser: argparse.ArgumentParser) -> None:
    """--bootstrap, --topic, --kafka-option and the record field names."""
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP"),
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP)",
    )
    parser.add_argument("--topic", required=True, help="the bridge's output topic")
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra kafka.* consumer setting, e.g. kafka.security.protocol=SASL_SSL (repeat)",
    )
    parser.add_argument("--id-field", default="id", help="JSON field with the record id")
    parser.add_argument("--key-field", default="key", help="JSON field with the group key")
    parser.add_argument("--amount-field", default="amount", help="JSON field with the amount")
    parser.add_argument("--ts-field", default="ts", help="JSON field with the event time (ms)")
    parser.add_argument(
        "--master", default="local[2]", help='Spark master ("" keeps the one spark-submit set)'
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.executor.memory=1g (repeat); wins over the defaults",
    )
    parser.add_argument("--table", required=True, help="path of the Delta aggregate table")


def source_from(args: argparse.Namespace) -> KafkaSource:
    """The :class:`KafkaSource` the options describe, with the bridge's security settings
    (spark_jobs.security) under any ``--kafka-option``."""
    options = security_options()
    for item in args.kafka_option:
        key, sep, value = item.partition("=")
        if not sep:
            raise JobConfigError(f"--kafka-option {item!r} must look like KEY=VALUE")
        options[key.strip()] = value
    return KafkaSource(
        bootstrap=args.bootstrap or "", topic=args.topic, options=tuple(options.items())
    )


def spark_conf_from(args: argparse.Namespace) -> dict[str, str]:
    """The ``--conf`` settings as a dict; a later repeat of a key wins."""
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise JobConfigError(f"--conf {item!r} must look like spark.KEY=VALUE")
        conf[key.strip()] = value
    return conf


def fields_from(args: argparse.Namespace) -> RecordFields:
    """The :class:`RecordFields` the options describe."""
    return RecordFields(
        id=args.id_field, key=args.key_field, amount=args.amount_field, ts=args.ts_field
    )


def setup_logging() -> None:
    """Our progress lines at INFO on stderr; everything else (py4j, Spark) at WARNING."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("spark_jobs").setLevel(logging.INFO)


def print_table(spark: SparkSession, table: str, limit: int) -> None:
    """Print the first ``limit`` rows of the aggregate table, ordered by window then key."""
    rows = spark.read.format("delta").load(table).orderBy("window_start", "key")
    rows.show(limit, truncate=False)
