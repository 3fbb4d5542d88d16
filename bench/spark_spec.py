"""Records/s of the streaming job for spec (a) next to the same work hand-written in PySpark,
in one Spark session (``local[2]``) and one run, alternating, so a change in the machine's load
hits both alike::

    python -m bench.spark_spec --records 100000 --reps 4

Spec (a) of issue 31 (:func:`spec_a`, the spec tests/spark/test_specs.py checks): per
``region`` and nested ``meta.device``, hopping windows of 2 minutes every minute,
count/avg/min/max and p50/p90 of ``amount``, watermark 1 hour, 20 000 offsets per micro-batch.

Two pairs (``--pairs``), each a spec job and a hand-written job doing the same work:

- ``equal-work`` (the figure of issue 31's acceptance 6): both keep the bad rows.
  ``spec`` is ``spark_jobs.stream.start_stream`` as ``python -m spark_jobs.stream --spec``
  runs it: checks the topic exists, claims the checkpoint for the spec's shape, creates the
  table with its spec properties and the bad-records table, parses each row (a bad row's
  fault named) and runs its second streaming query beside the aggregates, appending the bad
  records to the bad-records table. ``hand-written`` runs :func:`hand_aggregates` and
  :func:`hand_bad_rows`: the second query re-reads the topic, ``from_json`` on the fixed
  schema, and appends rows with a NULL required field (malformed JSON gives all NULL) with
  topic/partition/offset and the text to a Delta table, ``txnAppId``/``txnVersion`` =
  query id/batch id.
- ``aggregates-only``: ``spec-no-bad`` is the same spec with ``bad_records: false`` (one
  query; rows it cannot aggregate are counted by an observed metric and dropped);
  ``hand-no-bad`` is :func:`hand_aggregates` alone (bad rows dropped, not counted).

In both pairs the aggregates queries read the topic with ``read_committed`` and
``failOnDataLoss``, run in update mode with the available-now trigger on a new checkpoint,
persist each micro-batch, and MERGE its changed windows into a new Delta table with the same
:func:`spark_jobs.tables.upsert_rows` (null-safe merge keys, ``txnAppId``/``txnVersion``). What
the hand-written jobs still do not do: name a bad row's fault (the ``error`` column), keep its
Kafka key and timestamp, reject a non-finite ``amount`` or an out-of-range ``ts`` (which they
would aggregate), check the topic or the checkpoint, or store the spec in the table. The
generated records are all good, so both jobs of a pair write the same rows.

Before the timed runs, each job runs once, untimed, over ``--warmup-records`` records of
another topic (the JVM's first Delta table, Kafka read and state store are slower than any
later one). Each run is timed from the start of the job (before its tables are created) to the
end of its last query. Prints one JSON line per run (with the sum of Spark's per-phase
``durationMs`` over the aggregates query's micro-batches) and the medians per pair, end to
end and of the aggregates query alone (the sum of its micro-batches' ``triggerExecution``:
without the set-up, which a long-running job pays once); the ratios are the spec's overhead.
A local broker is started unless ``KAFKA_BOOTSTRAP`` is set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import operator
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import reduce
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from app.kafka.topics import create_topic
from devkit.kafka import LocalKafka
from spark_jobs.config import KafkaSource, StreamConfig
from spark_jobs.session import build_session
from spark_jobs.spec import AggregationSpec, parse_spec
from spark_jobs.stream import query_id, start_stream, wait_for
from spark_jobs.tables import TxnId, append_once, upsert_rows

PER_TRIGGER = 20_000


def spec_a(topic: str, bad_records: bool = True) -> AggregationSpec:
    """Spec (a) of issue 31, the one tests/spark/test_specs.py checks against a reference:
    two group-by columns (one nested), hopping window, avg/min/max/percentiles."""
    fields = [
        {"name": "id", "type": "string"},
        {"name": "region", "type": "string"},
        {"name": "device", "type": "string", "path": "meta.device"},
        {"name": "amount", "type": "double"},
        {"name": "ts", "type": "long"},
    ]
    amount = {"column": "amount"}
    return parse_spec(
        {
            "name": "a",
            "input": {"topics": [topic], "fields": fields},
            "event_time": {"column": "ts", "watermark": "1 hour"},
            "group_by": ["region", "device"],
            "window": {"type": "hopping", "size": "2 minutes", "slide": "1 minute"},
            "aggregates": [
                {"name": "n", "fn": "count"},
                {"name": "avg_amount", "fn": "avg", **amount},
                {"name": "min_amount", "fn": "min", **amount},
                {"name": "max_amount", "fn": "max", **amount},
                {"name": "amount", "fn": "percentile", **amount, "percentiles": [0.5, 0.9]},
            ],
            "bad_records": bad_records,
        }
    )


def produce(bootstrap: str, topic: str, records: int) -> None:
    """``records`` spec-(a) JSON records, 10 per second of event time, committed."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-seed", "linger.ms": 20}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    rng = random.Random(31)
    t0 = int(time.time() * 1000) - records * 100
    for i in range(records):
        doc = {
            "id": f"c-{i}",
            "region": rng.choice(("eu", "us", "ap")),
            "meta": {"device": rng.choice(("ios", "web", "android")), "v": 1},
            "amount": rng.randrange(0, 400) / 4,
            "ts": t0 + i * 100,
        }
        while True:
            try:
                producer.produce(topic, json.dumps(doc).encode(), key=doc["region"].encode())
                break
            except BufferError:
                producer.poll(0.5)
    producer.commit_transaction(120)


_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("region", StringType()),
        StructField("meta", StructType([StructField("device", StringType())])),
        StructField("amount", DoubleType()),
        StructField("ts", LongType()),
    ]
)
Queries = list[StreamingQuery]  # the job's queries, ended; the aggregates query first
Job = Callable[[SparkSession, str, str, Path], Queries]
# The declared fields, all required: a row with any of them NULL (or not JSON) is bad.
_REQUIRED = ("id", "region", "meta.device", "amount", "ts")


def _kafka(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
        .load()
    )


def _start(rows: DataFrame, mode: str, checkpoint: Path, sink: Any) -> StreamingQuery:
    return (
        rows.writeStream.outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(sink)
        .start()
    )


def hand_aggregates(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> StreamingQuery:
    """Spec (a) written directly in PySpark, with the same exactly-once Delta MERGE."""
    rows = (
        _kafka(spark, bootstrap, topic)
        .select(F.from_json(F.col("value").cast("string"), _SCHEMA).alias("r"))
        .select("r.id", "r.region", F.col("r.meta.device").alias("device"), "r.amount", "r.ts")
        .dropna()
        .withColumn("event_time", F.timestamp_millis("ts"))
        .withWatermark("event_time", "1 hour")
        .groupBy("region", "device", F.window("event_time", "2 minutes", "1 minute").alias("w"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.avg("amount").alias("avg_amount"),
            F.min("amount").alias("min_amount"),
            F.max("amount").alias("max_amount"),
            F.percentile_approx("amount", [0.5, 0.9], 10_000).alias("p"),
        )
        .select(
            "region", "device", F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"), "n", "avg_amount", "min_amount", "max_amount",
            F.col("p")[0].alias("amount_p50"), F.col("p")[1].alias("amount_p90"),
        )
    )  # fmt: skip
    table = str(work / "table")
    DeltaTable.createIfNotExists(spark).location(table).addColumns(rows.schema).execute()

    def sink(batch: DataFrame, batch_id: int) -> None:
        batch.persist()  # checked, then merged: compute the stateful batch once
        if not batch.isEmpty():
            keys = ["region", "device", "window_start"]
            upsert_rows(batch, table, keys, TxnId(query_id(batch), batch_id))
        batch.unpersist()

    return _start(rows, "update", work / "checkpoint" / "aggregates", sink)


def hand_bad_rows(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> StreamingQuery:
    """The bad rows as a PySpark author keeps them: a second query on the topic, rows whose
    ``from_json`` has a required field NULL (malformed JSON gives all NULL), appended with
    their topic/partition/offset and text to a Delta table with ``txnAppId``/``txnVersion``."""
    value = F.col("value").cast("string")
    parsed = _kafka(spark, bootstrap, topic).select(
        "topic", "partition", "offset", value.alias("value"), F.from_json(value, _SCHEMA).alias("r")
    )
    bad = parsed.where(reduce(operator.or_, [F.col(f"r.{f}").isNull() for f in _REQUIRED]))
    bad = bad.drop("r")
    table = str(work / "bad_records")
    DeltaTable.createIfNotExists(spark).location(table).addColumns(bad.schema).execute()

    def sink(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        if not batch.isEmpty():
            append_once(batch, table, TxnId(query_id(batch), batch_id))
        batch.unpersist()

    return _start(bad, "append", work / "checkpoint" / "bad_records", sink)


def hand_written(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> Queries:
    """The hand-written job that keeps bad rows: both queries, run together."""
    return [
        hand_aggregates(spark, bootstrap, topic, work),
        hand_bad_rows(spark, bootstrap, topic, work),
    ]


def hand_no_bad(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> Queries:
    """The hand-written aggregates alone: bad rows dropped and not counted."""
    return [hand_aggregates(spark, bootstrap, topic, work)]


def _spec_job(bad_records: bool) -> Job:
    def job(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> Queries:
        """The streaming job as ``python -m spark_jobs.stream --spec`` runs it (to its end)."""
        cfg = StreamConfig(
            source=KafkaSource(bootstrap, topic),
            table=str(work / "table"),
            checkpoint=str(work / "checkpoint"),
            max_offsets_per_trigger=PER_TRIGGER,
            spec=spec_a(topic, bad_records=bad_records),
        )
        running = start_stream(spark, cfg)
        wait_for(running)
        return list(running.queries)

    return job


def timed(job: str, spark: SparkSession, bootstrap: str, topic: str, work: Path) -> dict[str, Any]:
    """Run one job to its end: seconds in all, and the sum of Spark's per-phase durations over
    its aggregates query's micro-batches (``durationMs`` of each progress); for the other
    query, the sum of its ``triggerExecution``."""
    start = time.monotonic()
    queries = JOBS[job](spark, bootstrap, topic, work)
    for query in queries:
        query.awaitTermination()
    seconds = time.monotonic() - start
    progress = queries[0].recentProgress
    phases: dict[str, float] = {}
    for p in progress:
        for phase, ms in p.durationMs.items():
            phases[phase] = phases.get(phase, 0) + ms / 1000
    return {
        "job": job,
        "queries": len(queries),
        "seconds": round(seconds, 2),
        "batches": len(progress),
        "phases_s": {k: round(v, 2) for k, v in sorted(phases.items())},
        # The bad-records query, run beside it: the sum of its micro-batches' triggerExecution.
        "bad_query_s": [_busy_s(q) for q in queries[1:]],
    }


def _busy_s(query: StreamingQuery) -> float:
    ms = sum(p.durationMs.get("triggerExecution", 0) for p in query.recentProgress)
    return round(ms / 1000, 2)


JOBS: dict[str, Job] = {
    "spec": _spec_job(bad_records=True),
    "hand-written": hand_written,
    "spec-no-bad": _spec_job(bad_records=False),
    "hand-no-bad": hand_no_bad,
}
# Each pair: (spec job, hand-written job) doing the same work.
PAIRS: dict[str, tuple[str, str]] = {
    "equal-work": ("spec", "hand-written"),
    "aggregates-only": ("spec-no-bad", "hand-no-bad"),
}


@contextlib.contextmanager
def broker(work: Path) -> Iterator[str]:
    if os.environ.get("KAFKA_BOOTSTRAP"):
        yield os.environ["KAFKA_BOOTSTRAP"]
        return
    kafka = LocalKafka(work / "kafka")
    kafka.start()
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop()


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per pair of :data:`PAIRS` present in ``runs``: median rates of its two jobs and the spec's
    overhead, end to end (``records_per_s``: set-up, i.e. checks and tables, included) and of
    the aggregates query alone (``query_records_per_s``: the records over the sum of its
    micro-batches' ``triggerExecution``). The top-level figures are the first pair's."""
    pairs: dict[str, Any] = {}
    for pair, (spec, hand) in PAIRS.items():
        if not any(r["job"] == spec for r in runs):
            continue
        out: dict[str, Any] = {}
        for rate, prefix in (("records_per_s", ""), ("query_records_per_s", "query_")):
            medians = {
                job: statistics.median(r[rate] for r in runs if r["job"] == job)
                for job in (spec, hand)
            }
            out[f"medians_{rate}"] = medians
            out[f"{prefix}overhead"] = 1 - medians[spec] / medians[hand]
        pairs[pair] = out
    return {**next(iter(pairs.values())), "pairs": pairs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_spec", description=__doc__)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=3, help="runs of each job, alternating")
    p.add_argument(
        "--pairs",
        default=",".join(PAIRS),
        help=f"comma-separated, of {', '.join(PAIRS)} (default: all)",
    )
    p.add_argument("--out", type=Path, help="write the runs and medians here (JSON)")
    p.add_argument(
        "--warmup-records", type=int, default=2_000, help="untimed first run of each job (0: none)"
    )
    args = p.parse_args(argv)
    try:
        jobs = jobs_of(args.pairs)
    except ValueError as exc:
        p.error(str(exc))  # exit 2
    with tempfile.TemporaryDirectory(prefix="bench-spark-spec-") as tmp, broker(Path(tmp)) as b:
        topic = f"bench-spark-a-{int(time.time())}"
        create_topic(b, topic, 2, 1)
        produce(b, topic, args.records)
        spark = build_session("bench-spark-spec", "local[2]")
        if args.warmup_records:
            # The JVM's first Delta table, Kafka read and state store cost more than any later
            # one: warm both jobs up, untimed, so the first timed run is not charged for it.
            create_topic(b, f"{topic}-warmup", 2, 1)
            produce(b, f"{topic}-warmup", args.warmup_records)
            for name in jobs:
                timed(name, spark, b, f"{topic}-warmup", Path(tmp) / f"{name}-warmup")
        runs: list[dict[str, Any]] = []
        for rep in range(args.reps):
            order = jobs if rep % 2 == 0 else jobs[::-1]
            for name in order:
                run = {"rep": rep, **timed(name, spark, b, topic, Path(tmp) / f"{name}-{rep}")}
                run["records_per_s"] = round(args.records / run["seconds"])
                run["query_records_per_s"] = round(
                    args.records / run["phases_s"]["triggerExecution"]
                )
                print(json.dumps(run), flush=True)
                runs.append(run)
        spark.stop()
    summary = {"records": args.records, **summarise(runs)}
    print(json.dumps(summary))
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": runs, **summary}, indent=2) + "\n")
    return 0


def jobs_of(pairs: str) -> list[str]:
    """The jobs of the named pairs, in run order (each pair's spec job first)."""
    names = [n.strip() for n in pairs.split(",") if n.strip()]
    unknown = [n for n in names if n not in PAIRS]
    if unknown or not names:
        given = ", ".join(unknown) or "none given"
        raise ValueError(f"--pairs: {given}; known: {', '.join(PAIRS)}")
    return [job for n in names for job in PAIRS[n]]


if __name__ == "__main__":
    raise SystemExit(main())
