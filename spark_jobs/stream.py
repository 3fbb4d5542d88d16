"""``python -m spark_jobs.stream``: windowed aggregates of the bridge's output, exactly once.

Two streaming queries read the topic with ``read_committed``:

1. aggregates: the plan an aggregation spec compiles to (``--spec``; without one, the fixed
   per-key tumbling-window count, sum, approximate distinct ids and percentiles), in *update*
   mode; each micro-batch's changed rows are MERGEd into the Delta table on the spec's merge
   keys with transaction id (query id, batch id).
2. bad records: rows that cannot be parsed are appended to ``<table>_bad_records`` with the
   same kind of transaction id. A spec with ``bad_records: false`` starts no second query:
   the aggregates query counts the rows it drops (a log line per micro-batch).

Run ``--help`` for the options and see docs/spark.md for the guarantees.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.listener import StreamingQueryProgress
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from spark_jobs import cli
from spark_jobs.checkpoints import claim_checkpoint
from spark_jobs.config import AVAILABLE_NOW, StreamConfig, WindowSpec, check_writable
from spark_jobs.errors import SparkJobError
from spark_jobs.failures import run_job
from spark_jobs.faults import AFTER_DELTA_WRITE, BEFORE_DELTA_WRITE, NO_FAULTS, Faults
from spark_jobs.fixed import fixed_spec
from spark_jobs.iceberg.sink import FaultHook, IcebergSink, check_catalog, open_iceberg
from spark_jobs.parse import BAD_RECORD_SCHEMA
from spark_jobs.plan import AggregationPlan
from spark_jobs.preflight import check_topics
from spark_jobs.results import KafkaResults, ResultsTarget
from spark_jobs.session import build_session
from spark_jobs.source import check_registry, read_stream
from spark_jobs.tables import (
    TxnId,
    append_once,
    ensure_aggregate_table,
    ensure_table,
    upsert_rows,
)

log = logging.getLogger("spark_jobs.stream")

# Set by Spark on the stream thread that calls foreachBatch; stable across restarts because
# the id lives in the checkpoint, and new when the checkpoint is new (so a fresh checkpoint
# never collides with the transaction ids of an old one).
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


def query_id(batch: DataFrame) -> str:
    """Id of the streaming query that produced ``batch`` (call inside foreachBatch)."""
    qid = batch.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
    if not qid:
        raise SparkJobError("foreachBatch ran without a streaming query id; cannot write once")
    return qid


class BatchSink:
    """A foreachBatch function: one idempotent Delta write per non-empty micro-batch, a MERGE
    on ``merge_keys`` or, without keys, an append; then, with ``results``, the same rows to
    the Kafka results topic (written once per batch id, :mod:`spark_jobs.results`)."""

    def __init__(
        self,
        table: str,
        merge_keys: list[str] | None,
        results: KafkaResults | None = None,
        faults: Faults = NO_FAULTS,
        iceberg: IcebergSink | None = None,
    ) -> None:
        self.faults = faults
        self.table = table
        self.merge_keys = merge_keys
        self.results = results
        self.iceberg = iceberg
        self.rows_written = 0

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        txn = TxnId(query_id(batch), batch_id)
        batch.persist()  # counted, then written: compute the stateful batch once
        try:
            rows = batch.count()
            if rows:
                self.faults.at(BEFORE_DELTA_WRITE, batch_id)
                if self.merge_keys:
                    upsert_rows(batch, self.table, self.merge_keys, txn)
                else:
                    append_once(batch, self.table, txn)
                self.faults.at(AFTER_DELTA_WRITE, batch_id)
                if self.iceberg is not None:
                    self.iceberg.write(batch, txn.app_id, batch_id)
                if self.results is not None:
                    self.results.write(batch, txn.app_id, batch_id)
        finally:
            batch.unpersist()
        self.rows_written += rows
        log.info("batch %d: %d rows → %s", batch_id, rows, self.table)

    def close(self) -> None:
        if self.results is not None:
            self.results.close()


@dataclass(slots=True, frozen=True)
class StreamSummary:
    """What one run did (replayed batches count again in ``windows_written``).

    ``late_rows_dropped`` is Spark's ``numRowsDroppedByWatermark`` summed over the run:
    partially aggregated (group, window) rows whose window ended at or before the previous
    batch's watermark, so several late rows of one key and window in one partition and batch
    count once. Non-zero means rows were left out for lateness; a backfill over that range
    puts them in (docs/spark.md, "Late data").
    """

    batch_ids: tuple[int, ...]
    input_rows: int
    windows_written: int
    bad_records: int
    late_rows_dropped: int
    results_written: int = 0  # rows committed to the Kafka results topic (output.kafka)


# The observed metric (``DataFrame.observe``) of the rows the parse kept, with
# ``bad_records: false``: the aggregates query's input rows less these were dropped as bad.
GOOD_ROWS = "good_rows"


def dropped_rows(progress: StreamingQueryProgress) -> int:
    """Rows of one micro-batch that could not be aggregated and were dropped (a job with
    ``bad_records: false``; 0 for a job without the :data:`GOOD_ROWS` metric)."""
    good = progress.observedMetrics.get(GOOD_ROWS)
    return 0 if good is None else progress.numInputRows - int(good["rows"])


@dataclass(slots=True)
class RunningStream:
    """The queries of one job and their sinks: aggregates, and bad records unless the spec
    says ``bad_records: false``."""

    aggregates: StreamingQuery
    bad_records: StreamingQuery | None
    windows_sink: BatchSink
    bad_sink: BatchSink | None

    @property
    def queries(self) -> tuple[StreamingQuery, ...]:
        if self.bad_records is None:
            return (self.aggregates,)
        return self.aggregates, self.bad_records

    def summary(self) -> StreamSummary:
        progress = self.aggregates.recentProgress
        return StreamSummary(
            batch_ids=tuple(p.batchId for p in progress),
            input_rows=sum(p.numInputRows for p in progress),
            windows_written=self.windows_sink.rows_written,
            bad_records=sum(dropped_rows(p) for p in progress)
            if self.bad_sink is None
            else self.bad_sink.rows_written,
            late_rows_dropped=sum(
                op.numRowsDroppedByWatermark for p in progress for op in p.stateOperators
            ),
            results_written=0
            if self.windows_sink.results is None
            else self.windows_sink.results.rows_written,
        )


def job_plan(cfg: StreamConfig) -> AggregationPlan:
    """The plan of the job's spec; without one, of the fixed aggregate (``--window`` ...)."""
    return AggregationPlan.compile(cfg.spec or fixed_spec(cfg.fields, cfg.window), cfg.python)


def start_stream(
    spark: SparkSession,
    cfg: StreamConfig,
    faults: Faults = NO_FAULTS,
    iceberg_fault: FaultHook | None = None,
) -> RunningStream:
    """Check the paths and topics, create or evolve the tables and start the queries;
    ``faults``, ``iceberg_fault``: a test rig's (:mod:`spark_jobs.faults`)."""
    _check_paths(cfg)
    plan = job_plan(cfg)
    keep_bad = plan.spec.bad_records
    check_topics(spark, cfg.source)
    claim_checkpoint(cfg.checkpoint, plan.spec.shape())
    ensure_aggregate_table(spark, cfg.table, plan)
    if keep_bad:
        ensure_table(spark, cfg.bad_table, BAD_RECORD_SCHEMA)

    results = _open_results(cfg, plan, faults)
    iceberg = open_iceberg(spark, plan, iceberg_fault)
    good = plan.parse(_raw(spark, cfg)).good
    if not keep_bad:  # counted here, as no bad-records query reads them
        good = good.observe(GOOD_ROWS, F.count(F.lit(1)).alias("rows"))
    rows = plan.aggregate(plan.records(good, streaming=True))
    rows_sink = BatchSink(cfg.table, plan.merge_keys, results, faults, iceberg)
    updates = rows.writeStream.outputMode(plan.output_mode)
    aggregates = _configure(updates, cfg, "aggregates").foreachBatch(rows_sink).start()
    if not keep_bad:
        return RunningStream(aggregates, None, rows_sink, None)

    bad_sink = BatchSink(cfg.bad_table, merge_keys=None)
    bad = plan.parse(_raw(spark, cfg)).bad.writeStream.outputMode("append")
    bad_records = _configure(bad, cfg, "bad_records").foreachBatch(bad_sink).start()
    return RunningStream(aggregates, bad_records, rows_sink, bad_sink)


def _open_results(
    cfg: StreamConfig, plan: AggregationPlan, faults: Faults = NO_FAULTS
) -> KafkaResults | None:
    """The Kafka results sink of ``output.kafka``, its producer ready (previous driver
    fenced) and its last committed batch read; None without ``output.kafka``."""
    target = ResultsTarget.of(plan.spec, cfg.source.bootstrap)
    if target is None:
        return None
    results = KafkaResults(target, plan.merge_keys, faults)
    results.open()
    return results


def _check_paths(cfg: StreamConfig) -> None:
    check_writable("--table", cfg.table)
    if cfg.spec is None or cfg.spec.bad_records:
        check_writable("--bad-records-table", cfg.bad_table)
    check_writable("--checkpoint", cfg.checkpoint)


def _raw(spark: SparkSession, cfg: StreamConfig) -> DataFrame:
    return read_stream(spark, cfg.source, cfg.starting_offsets, cfg.max_offsets_per_trigger)


def _configure(writer: DataStreamWriter, cfg: StreamConfig, name: str) -> DataStreamWriter:
    writer = writer.option("checkpointLocation", f"{cfg.checkpoint.rstrip('/')}/{name}")
    if cfg.trigger == AVAILABLE_NOW:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=cfg.trigger)


def wait_for(running: RunningStream, stop: threading.Event | None = None) -> StreamSummary:
    """Block until both queries end (available-now) or ``stop`` is set; re-raise failures."""
    logged: dict[str, int] = {}
    try:
        while any(q.isActive for q in running.queries):
            if stop is not None and stop.is_set():
                break
            for q in running.queries:
                q.awaitTermination(1)  # raises StreamingQueryException if q failed
                _log_progress(q, logged)
        for q in running.queries:
            q.awaitTermination(1)
    finally:
        for q in running.queries:
            if q.isActive:
                q.stop()
        running.windows_sink.close()
    return running.summary()


def _log_progress(query: StreamingQuery, logged: dict[str, int]) -> None:
    progress = query.lastProgress
    if progress is None or logged.get(str(query.id)) == progress.batchId:
        return
    logged[str(query.id)] = progress.batchId
    late = sum(op.numRowsDroppedByWatermark for op in progress.stateOperators)
    bad = dropped_rows(progress)
    level = logging.WARNING if late or bad else logging.INFO
    log.log(
        level,
        "query %s batch %d: %d input rows, %d late rows dropped%s",
        query.id,
        progress.batchId,
        progress.numInputRows,
        late,
        f", {bad} bad rows dropped (bad_records: false)" if bad else "",
    )


def run_stream(
    spark: SparkSession,
    cfg: StreamConfig,
    stop: threading.Event | None = None,
    faults: Faults = NO_FAULTS,
    iceberg_fault: FaultHook | None = None,
) -> StreamSummary:
    """Start the job and wait for it; see :func:`wait_for`."""
    return wait_for(start_stream(spark, cfg, faults, iceberg_fault), stop)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_jobs.stream",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_source_args(parser)
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    parser.add_argument("--bad-records-table", help="default: <table>_bad_records")
    parser.add_argument(
        "--trigger",
        default=AVAILABLE_NOW,
        help='available-now (default) or an interval like "10 seconds"',
    )
    parser.add_argument("--window", help="fixed aggregate: tumbling window size (1 minute)")
    parser.add_argument(
        "--watermark", help="fixed aggregate: allowed event-time lateness (10 minutes)"
    )
    parser.add_argument(
        "--distinct-rsd",
        type=float,
        help="fixed aggregate: relative std. deviation of approx_count_distinct (0.05)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="earliest, latest or Spark offsets JSON (first run only)",
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, help="cap per micro-batch")
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        metavar="N",
        help="print the first N rows of the table at the end",
    )
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace) -> StreamConfig:
    spec = cli.spec_from(args)
    fixed = {"--window": args.window, "--watermark": args.watermark}
    fixed["--distinct-rsd"] = args.distinct_rsd
    cli.refuse_fixed_options_with_spec(spec, fixed)
    return StreamConfig(
        source=cli.source_from(args, spec),
        table=cli.table_from(args, spec),
        checkpoint=args.checkpoint,
        fields=cli.fields_from(args),
        window=WindowSpec(
            args.window or "1 minute",
            args.watermark or "10 minutes",
            0.05 if args.distinct_rsd is None else args.distinct_rsd,
        ),
        trigger=args.trigger,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        bad_records_table=args.bad_records_table,
        spec=spec,
        python=args.pipeline,
    )


def main(argv: Sequence[str] | None = None) -> int:
    return launch(argv)


def launch(
    argv: Sequence[str] | None,
    faults: Faults = NO_FAULTS,
    iceberg_fault: FaultHook | None = None,
) -> int:
    """:func:`main` composed with a test rig's ``faults`` and ``iceberg_fault`` (a crash hook
    around the Iceberg commit); the job itself has none."""
    args = parse_args(argv)
    cli.setup_logging(args.log_level)
    return run_job("spark_jobs.stream", lambda: _main(args, faults, iceberg_fault))


def _main(
    args: argparse.Namespace,
    faults: Faults = NO_FAULTS,
    iceberg_fault: FaultHook | None = None,
) -> int:
    cfg = config_from(args)
    _check_paths(cfg)  # before Spark starts: a mistake here costs no JVM start-up
    check_registry(cfg.source)
    check_catalog(cfg.spec)
    spark = build_session(
        "eos-bridge-stream", args.master or None, cli.spark_conf_from(args), args.spark_log_level
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    summary = run_stream(spark, cfg, stop, faults, iceberg_fault)
    print(f"stream summary: {summary}")
    if args.show:
        cli.print_table(spark, cfg.table, args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
