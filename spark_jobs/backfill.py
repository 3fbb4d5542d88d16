"""``python -m spark_jobs.backfill``: recompute a slice of the topic and replace its windows.

Reads a bounded range (offsets or Kafka timestamps) with ``read_committed`` in batch mode,
computes the same statistics as the streaming job (no watermark: late rows count here), and
replaces, in one Delta commit, every row of the table whose window starts between the first
and the last window found in the range. Choose a range that covers whole windows: a window
only partly inside the range is replaced by the part inside. Rows that fail to parse are
counted in the summary (the streaming job keeps them aside; the backfill does not copy them
again).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_jobs import cli
from spark_jobs.aggregate import aggregate_windows
from spark_jobs.config import BackfillConfig, KafkaRange, WindowSpec
from spark_jobs.errors import JobConfigError, SparkJobError
from spark_jobs.parse import parse_records
from spark_jobs.session import build_session
from spark_jobs.source import read_range
from spark_jobs.tables import (
    SPEC_PROPERTY,
    ensure_aggregate_table,
    replace_windows,
    table_property,
)

log = logging.getLogger("spark_jobs.backfill")


@dataclass(slots=True, frozen=True)
class BackfillSummary:
    """What one backfill did; the window bounds are epoch microseconds (None: empty range)."""

    windows_written: int
    bad_records: int
    first_window_us: int | None
    last_window_us: int | None


def resolve_spec(spark: SparkSession, cfg: BackfillConfig) -> WindowSpec:
    """The window spec to use: the one given, else the one the table was created with."""
    if cfg.window is not None:
        return cfg.window
    stored = table_property(spark, cfg.table, SPEC_PROPERTY)
    if stored is None:
        raise JobConfigError(f"--table {cfg.table} records no window spec; pass --window")
    spec = json.loads(stored)
    return WindowSpec(size=str(spec["window"]), distinct_rsd=float(spec["distinct_rsd"]))


def run_backfill(spark: SparkSession, cfg: BackfillConfig) -> BackfillSummary:
    """Recompute the range and replace the affected windows in one Delta commit."""
    spec = resolve_spec(spark, cfg)
    ensure_aggregate_table(spark, cfg.table, spec.table_property())
    parsed = parse_records(read_range(spark, cfg.source, cfg.range), cfg.fields)
    rows = aggregate_windows(parsed.good, spec).persist()
    try:
        bounds = rows.agg(
            F.count(F.lit(1)).alias("n"),
            F.min(F.unix_micros("window_start")).alias("first"),
            F.max(F.unix_micros("window_start")).alias("last"),
        ).first()
        bad = parsed.bad.count()
        assert bounds is not None  # a global aggregate always yields one row
        if bounds["n"] == 0:
            log.warning("the range holds no valid records; the table is unchanged")
            return BackfillSummary(0, bad, None, None)
        replace_windows(rows, cfg.table, bounds["first"], bounds["last"])
        return BackfillSummary(bounds["n"], bad, bounds["first"], bounds["last"])
    finally:
        rows.unpersist()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.backfill",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_source_args(parser)
    parser.add_argument(
        "--starting-offsets", help='Spark offsets JSON, e.g. {"t":{"0":100}}, or "earliest"'
    )
    parser.add_argument("--ending-offsets", help='exclusive; offsets JSON or "latest"')
    parser.add_argument("--starting-timestamp", type=int, help="Kafka timestamp, epoch ms")
    parser.add_argument("--ending-timestamp", type=int, help="exclusive; epoch ms")
    parser.add_argument("--window", help="window size (default: the table's)")
    parser.add_argument(
        "--distinct-rsd", type=float, default=0.05, help="only with --window; as the stream"
    )
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace) -> BackfillConfig:
    kafka_range = KafkaRange(
        starting_offsets=args.starting_offsets,
        ending_offsets=args.ending_offsets,
        starting_timestamp=args.starting_timestamp,
        ending_timestamp=args.ending_timestamp,
    )
    window = (
        None if args.window is None else WindowSpec(args.window, "10 minutes", args.distinct_rsd)
    )
    return BackfillConfig(
        source=cli.source_from(args),
        table=args.table,
        range=kafka_range,
        fields=cli.fields_from(args),
        window=window,
    )


def main(argv: Sequence[str] | None = None) -> int:
    cli.setup_logging()
    args = parse_args(argv)
    try:
        cfg = config_from(args)
        spark = build_session("eos-bridge-backfill", args.master or None, cli.spark_conf_from(args))
        summary = run_backfill(spark, cfg)
    except SparkJobError as exc:
        print(f"spark_jobs.backfill: {exc}", file=sys.stderr)
        return 2
    print(f"backfill summary: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
