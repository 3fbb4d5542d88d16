"""Records/s of the streaming job for spec (a) next to the same aggregation hand-written in
PySpark, in one Spark session (``local[2]``) and one run, alternating, so a change in the
machine's load hits both alike::

    python -m bench.spark_spec --records 100000 --reps 3

Spec (a) of issue 31 (:func:`spec_a`, the spec tests/spark/test_specs.py checks): per
``region`` and nested ``meta.device``, hopping windows of 2 minutes every minute,
count/avg/min/max and p50/p90 of ``amount``, watermark 1 hour, 20 000 offsets per micro-batch.

Both jobs read the topic with ``read_committed`` and ``failOnDataLoss``, run in update mode
with the available-now trigger on a new checkpoint, persist each micro-batch, and MERGE its
changed windows into a new Delta table with the same :func:`spark_jobs.tables.upsert_rows`
(null-safe merge keys, ``txnAppId``/``txnVersion`` = query id/batch id): the same table, the
same exactly-once write.

- spec: ``spark_jobs.stream.start_stream`` as ``python -m spark_jobs.stream --spec`` runs it:
  checks the topic exists, claims the checkpoint for the spec's shape, creates the table with
  its spec properties and the bad-records table, parses each row (a bad row's fault named),
  and runs its second streaming query beside the aggregates, which appends the bad records to
  the bad-records table; one count per micro-batch over the persisted batch. The timed query
  (``query_records_per_s``) is the aggregates query.
- hand-written: ``from_json`` on the fixed schema, rows with a NULL field dropped, the same
  aggregation; ``isEmpty`` per micro-batch. It does **not** keep bad rows (no bad-records
  table, no per-field diagnosis; rows with a non-finite amount or an out-of-range ``ts``,
  which the spec job rejects, would be aggregated), does not check the topic or the
  checkpoint, and stores no spec in the table. The generated records are all good, so both
  tables hold the same rows.

Before the timed runs, each job runs once, untimed, over ``--warmup-records`` records of
another topic (the JVM's first Delta table, Kafka read and state store are slower than any
later one). Each run is timed from the start of the job (before its tables are created) to
the end of its query. Prints one JSON line per run (with the sum of Spark's per-phase
``durationMs`` over its micro-batches) and the medians, end to end and of the streaming query
alone (the sum of its micro-batches' ``triggerExecution``: without the set-up, which a
long-running job pays once); the ratios are the spec's overhead. A local broker is started
unless ``KAFKA_BOOTSTRAP`` is set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
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
from spark_jobs.tables import TxnId, upsert_rows

PER_TRIGGER = 20_000


def spec_a(topic: str) -> AggregationSpec:
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


def hand_written(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> StreamingQuery:
    """Spec (a) written directly in PySpark, with the same exactly-once Delta MERGE."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "true")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
        .load()
    )
    rows = (
        raw.select(F.from_json(F.col("value").cast("string"), _SCHEMA).alias("r"))
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

    return (
        rows.writeStream.outputMode("update")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .foreachBatch(sink)
        .start()
    )


def with_spec(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> StreamingQuery:
    """The streaming job as ``python -m spark_jobs.stream --spec`` runs it (its query started)."""
    cfg = StreamConfig(
        source=KafkaSource(bootstrap, topic),
        table=str(work / "table"),
        checkpoint=str(work / "checkpoint"),
        max_offsets_per_trigger=PER_TRIGGER,
        spec=spec_a(topic),
    )
    running = start_stream(spark, cfg)
    wait_for(running)
    return running.aggregates


def timed(job: str, spark: SparkSession, bootstrap: str, topic: str, work: Path) -> dict[str, Any]:
    """Run one job to its end: seconds in all, before the query ran (set-up), and the sum of
    Spark's per-phase durations over its micro-batches (``durationMs`` of each progress)."""
    start = time.monotonic()
    query = JOBS[job](spark, bootstrap, topic, work)
    query.awaitTermination()
    seconds = time.monotonic() - start
    progress = query.recentProgress
    phases: dict[str, float] = {}
    for p in progress:
        for phase, ms in p.durationMs.items():
            phases[phase] = phases.get(phase, 0) + ms / 1000
    return {
        "job": job,
        "seconds": round(seconds, 2),
        "batches": len(progress),
        "phases_s": {k: round(v, 2) for k, v in sorted(phases.items())},
    }


JOBS: dict[str, Callable[[SparkSession, str, str, Path], StreamingQuery]] = {
    "spec": with_spec,
    "hand-written": hand_written,
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
    """Medians per job and the spec's overhead: end to end (``records_per_s``: set-up, i.e.
    checks and tables, included) and of the streaming query alone (``query_records_per_s``:
    the records over the sum of its micro-batches' ``triggerExecution``)."""
    out: dict[str, Any] = {}
    for rate, prefix in (("records_per_s", ""), ("query_records_per_s", "query_")):
        medians = {
            name: statistics.median(r[rate] for r in runs if r["job"] == name) for name in JOBS
        }
        out[f"medians_{rate}"] = medians
        out[f"{prefix}overhead"] = 1 - medians["spec"] / medians["hand-written"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_spec", description=__doc__)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=3, help="runs of each job, alternating")
    p.add_argument("--out", type=Path, help="write the runs and medians here (JSON)")
    p.add_argument(
        "--warmup-records", type=int, default=2_000, help="untimed first run of each job (0: none)"
    )
    args = p.parse_args(argv)
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
            for name in JOBS:
                timed(name, spark, b, f"{topic}-warmup", Path(tmp) / f"{name}-warmup")
        runs: list[dict[str, Any]] = []
        for rep in range(args.reps):
            order = list(JOBS) if rep % 2 == 0 else list(reversed(JOBS))
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


if __name__ == "__main__":
    raise SystemExit(main())
