"""Command-line options the jobs share, and turning them into config objects."""

from __future__ import annotations

import argparse
import logging
import os

from pyspark.sql import SparkSession

from spark_jobs.avro_input import RegistryInput, registry_input
from spark_jobs.config import KafkaSource, RecordFields
from spark_jobs.errors import JobConfigError
from spark_jobs.security import security_options
from spark_jobs.spec import AggregationSpec, load_spec


def add_source_args(parser: argparse.ArgumentParser) -> None:
    """--spec, --pipeline, --bootstrap, --topic, --kafka-option and the record field names."""
    parser.add_argument(
        "--spec",
        metavar="FILE",
        help="aggregation spec (YAML or JSON, docs/spark.md); default: the fixed aggregate",
    )
    parser.add_argument(
        "--pipeline",
        metavar="MODULE:FUNCTION",
        help="a function DataFrame -> DataFrame over the spec's typed records, instead of its "
        "aggregates",
    )
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP"),
        help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP)",
    )
    parser.add_argument("--topic", help="the input topic(s), comma-separated (default: the spec's)")
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra kafka.* consumer setting, e.g. kafka.security.protocol=SASL_SSL (repeat)",
    )
    parser.add_argument(
        "--input-format",
        choices=("json", "avro"),
        help="the topic's values: JSON text or Avro behind a Schema Registry (default: the "
        "spec's input.format, else json)",
    )
    parser.add_argument(
        "--registry-url",
        help="Schema Registry of --input-format avro (default: the spec's, else "
        "$BRIDGE_SCHEMA_REGISTRY__URL; basic auth from $BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH)",
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
    parser.add_argument(
        "--table", help="absolute path or URL of the Delta table (default: the spec's)"
    )
    parser.add_argument(
        "--spark-log-level",
        default="WARN",
        choices=("WARN", "ERROR"),
        help="Spark's own log level on stderr (make demo: ERROR)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING"),
        help="the jobs' log level on stderr; DEBUG adds the full trace of a failure",
    )


def spec_from(args: argparse.Namespace) -> AggregationSpec | None:
    """The ``--spec`` file's spec (None: the fixed aggregate)."""
    return None if args.spec is None else load_spec(args.spec)


def refuse_fixed_options_with_spec(spec: AggregationSpec | None, fixed: dict[str, object]) -> None:
    """The fixed aggregate's options mean nothing next to a spec: say so rather than ignore."""
    given = [name for name, value in fixed.items() if value is not None]
    if spec is not None and given:
        raise JobConfigError(
            f"{', '.join(given)} set the fixed aggregate; with --spec, put it in the spec"
        )


def table_from(args: argparse.Namespace, spec: AggregationSpec | None) -> str:
    """``--table``, else the spec's ``output.table``."""
    table = args.table or (spec.output.table if spec is not None else None)
    if not table:
        raise JobConfigError("--table is required (or output.table in the spec)")
    return str(table)


def source_from(args: argparse.Namespace, spec: AggregationSpec | None = None) -> KafkaSource:
    """The :class:`KafkaSource` the options describe, with the bridge's security settings
    (spark_jobs.security) under any ``--kafka-option``. ``--topic`` wins over the spec's."""
    topic = args.topic or (",".join(spec.input.topics) if spec is not None else "")
    if not topic:
        raise JobConfigError("--topic is required (or input.topics in the spec)")
    options = security_options()
    for item in args.kafka_option:
        key, sep, value = item.partition("=")
        if not sep:
            raise JobConfigError(f"--kafka-option {item!r} must look like KEY=VALUE")
        options[key.strip()] = value
    return KafkaSource(
        bootstrap=args.bootstrap or "",
        topic=topic,
        options=tuple(options.items()),
        registry=registry_from(args, spec),
    )


def registry_from(
    args: argparse.Namespace, spec: AggregationSpec | None = None
) -> RegistryInput | None:
    """Where Avro values find their schemas (None: the values are JSON text)."""
    fmt = args.input_format or (spec.input.format if spec is not None else "json")
    given = spec.input.registry if spec is not None else None
    url = args.registry_url or (given.url if given is not None else None)
    return registry_input(fmt, url, given.subject if given is not None else None)


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


def setup_logging(level: str = "INFO") -> None:
    """Our progress lines at ``level`` on stderr; everything else (py4j, Spark) at WARNING."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("spark_jobs").setLevel(level)


def print_table(spark: SparkSession, table: str, limit: int) -> None:
    """Print the first ``limit`` rows of the table, ordered by window start, then column order."""
    rows = spark.read.format("delta").load(table)
    order = [c for c in ("window_start",) if c in rows.columns] + rows.columns[:1]
    rows.orderBy(*order).show(limit, truncate=False)
