"""``python -m spark_jobs.backfill``: recompute a slice of the topic and replace its rows.

Reads a bounded range (offsets or Kafka timestamps) with ``read_committed`` in batch mode,
runs the streaming job's own plan over it (no watermark: late rows count here), and replaces
the affected rows in one Delta commit:

- windowed specs: every row whose window starts between the first and the last window found
  in the range. Choose a range that covers whole windows: a window only partly inside the
  range is replaced by the part inside. Hopping windows that reach outside the range's event
  times (the first and last ``size / slide - 1`` of them) are left as they are;
- specs without a window (running totals since the start): the range must start at the
  earliest offsets, and the whole table is replaced.

The spec comes from ``--spec``, the fixed aggregate's ``--window``, or else the table itself
(the stream records its spec there). Rows that fail to parse are counted in the summary (the
streaming job keeps them aside; the backfill does not copy them again).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs import cli
from spark_jobs.config import BackfillConfig, KafkaRange, WindowSpec, check_writable
from spark_jobs.errors import JobConfigError
from spark_jobs.failures import run_job
from spark_jobs.fixed import fixed_spec
from spark_jobs.plan import AggregationPlan
from spark_jobs.preflight import check_topics
from spark_jobs.session import build_session
from spark_jobs.source import check_registry, read_range
from spark_jobs.spec import interval_micros
from spark_jobs.tables import ensure_aggregate_table, replace_all, replace_windows, stored_spec

log = logging.getLogger("spark_jobs.backfill")


@dataclass(slots=True, frozen=True)
class BackfillSummary:
    """What one backfill did; the window bounds are epoch microseconds (None: empty range or
    no window)."""

    windows_written: int
    bad_records: int
    first_window_us: int | None
    last_window_us: int | None


def resolve_plan(spark: SparkSession, cfg: BackfillConfig) -> AggregationPlan:
    """The plan to use: ``--spec``, the fixed aggregate of ``--window``, else the table's."""
    if cfg.spec is not None:
        return AggregationPlan.compile(cfg.spec, cfg.python)
    if cfg.window is not None:
        return AggregationPlan.compile(fixed_spec(cfg.fields, cfg.window), cfg.python)
    stored = stored_spec(spark, cfg.table)
    if stored is None:
        raise JobConfigError(f"--table {cfg.table} records no spec; pass --spec or --window")
    return AggregationPlan.compile(stored, cfg.python)


def run_backfill(spark: SparkSession, cfg: BackfillConfig) -> BackfillSummary:
    """Recompute the range and replace the affected rows in one Delta commit."""
    check_writable("--table", cfg.table)
    plan = resolve_plan(spark, cfg)
    windowed = "window_start" in plan.merge_keys
    if not windowed and not _from_start(cfg.range):
        raise JobConfigError(
            "this spec has no window (running totals since the start): the backfill range "
            "must start at the earliest offsets (--starting-offsets earliest)"
        )
    check_topics(spark, cfg.source)
    ensure_aggregate_table(spark, cfg.table, plan)
    parsed = plan.parse(read_range(spark, cfg.source, cfg.range))
    records = plan.records(parsed.good, streaming=False)
    rows = _complete_windows(plan, records, plan.aggregate(records)).persist()
    try:
        bad = parsed.bad.count()
        if not windowed:
            replace_all(rows, cfg.table)
            return BackfillSummary(rows.count(), bad, None, None)
        bounds = rows.agg(
            F.count(F.lit(1)).alias("n"),
            F.min(F.unix_micros("window_start")).alias("first"),
            F.max(F.unix_micros("window_start")).alias("last"),
        ).first()
        assert bounds is not None  # a global aggregate always yields one row
        if bounds["n"] == 0:
            log.warning("the range holds no valid records; the table is unchanged")
            return BackfillSummary(0, bad, None, None)
        replace_windows(rows, cfg.table, bounds["first"], bounds["last"])
        return BackfillSummary(bounds["n"], bad, bounds["first"], bounds["last"])
    finally:
        rows.unpersist()


def _from_start(kafka_range: KafkaRange) -> bool:
    return kafka_range.starting_timestamp is None and kafka_range.starting_offsets in (
        None,
        "earliest",
    )


def _complete_windows(plan: AggregationPlan, records: DataFrame, rows: DataFrame) -> DataFrame:
    """Hopping windows only: keep the windows that lie inside the range's event times (rounded
    out to the slide), so no window the range sees only in part replaces the stream's row."""
    window = plan.spec.window
    if window is None or window.type != "hopping" or window.slide is None:
        return rows
    slide = interval_micros(window.slide)
    span = records.agg(
        F.min(F.unix_micros("event_time")).alias("lo"),
        F.max(F.unix_micros("event_time")).alias("hi"),
    ).first()
    if span is None or span["lo"] is None:
        return rows
    lo = span["lo"] - span["lo"] % slide
    hi = span["hi"] - span["hi"] % slide + slide
    return rows.where((F.unix_micros("window_start") >= lo) & (F.unix_micros("window_end") <= hi))


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
    parser.add_argument("--window", help="fixed aggregate: window size (default: the table's)")
    parser.add_argument(
        "--distinct-rsd", type=float, help="fixed aggregate, only with --window; as the stream"
    )
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace) -> BackfillConfig:
    spec = cli.spec_from(args)
    cli.refuse_fixed_options_with_spec(
        spec, {"--window": args.window, "--distinct-rsd": args.distinct_rsd}
    )
    kafka_range = KafkaRange(
        starting_offsets=args.starting_offsets,
        ending_offsets=args.ending_offsets,
        starting_timestamp=args.starting_timestamp,
        ending_timestamp=args.ending_timestamp,
    )
    rsd = 0.05 if args.distinct_rsd is None else args.distinct_rsd
    window = None if args.window is None else WindowSpec(args.window, "10 minutes", rsd)
    return BackfillConfig(
        source=cli.source_from(args, spec),
        table=cli.table_from(args, spec),
        range=kafka_range,
        fields=cli.fields_from(args),
        window=window,
        spec=spec,
        python=args.pipeline,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cli.setup_logging(args.log_level)
    return run_job("spark_jobs.backfill", lambda: _main(args))


def _main(args: argparse.Namespace) -> int:
    cfg = config_from(args)
    check_writable("--table", cfg.table)  # before Spark starts
    check_registry(cfg.source)
    spark = build_session(
        "eos-bridge-backfill", args.master or None, cli.spark_conf_from(args), args.spark_log_level
    )
    summary = run_backfill(spark, cfg)
    print(f"backfill summary: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
