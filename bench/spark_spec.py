"""Records/s of the streaming job for spec (a) next to the same aggregation hand-written in
PySpark, in one Spark session (``local[2]``) and one run, alternating, so a change in the
machine's load hits both alike::

    python -m bench.spark_spec --records 100000 --reps 3

Spec (a) of issue 31: per ``region`` and nested ``meta.device``, hopping windows of 2 minutes
every minute, count/avg/min/max and p50/p90 of ``amount``. The spec job is the real one
(``spark_jobs.stream.run_stream``: the bad-records query beside the aggregates, rows parsed and
checked field by field); the hand-written job is what a user would write without it:
``from_json`` on a fixed schema, rows with a NULL field dropped, the same aggregation, MERGEd
into Delta with the same exactly-once transaction ids. Each run starts on a new table and
checkpoint with the available-now trigger and is timed from the start of the job (tables
created) to its end. Prints one JSON line per run and the medians; the ratio is the spec's
overhead. A local broker is started unless ``KAFKA_BOOTSTRAP`` is set.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from app.kafka.topics import create_topic
from devkit.kafka import LocalKafka
from spark_jobs.config import KafkaSource, StreamConfig
from spark_jobs.session import build_session
from spark_jobs.spec import AggregationSpec, parse_spec
from spark_jobs.stream import query_id, run_stream
from spark_jobs.tables import TxnId, upsert_rows

PER_TRIGGER = 20_000


def spec_a(topic: str) -> AggregationSpec:
    return parse_spec(
        {
            "name": "bench-a",
            "input": {
                "topics": [topic],
                "fields": [
                    {"name": "id", "type": "string"},
                    {"name": "region", "type": "string"},
                    {"name": "device", "type": "string", "path": "meta.device"},
                    {"name": "amount", "type": "double"},
                    {"name": "ts", "type": "long"},
                ],
            },
            "event_time": {"column": "ts", "watermark": "1 hour"},
            "group_by": ["region", "device"],
            "window": {"type": "hopping", "size": "2 minutes", "slide": "1 minute"},
            "aggregates": [
                {"name": "n", "fn": "count"},
                {"name": "avg_amount", "fn": "avg", "column": "amount"},
                {"name": "min_amount", "fn": "min", "column": "amount"},
                {"name": "max_amount", "fn": "max", "column": "amount"},
                {"name": "amount", "fn": "percentile", "column": "amount",
                 "percentiles": [0.5, 0.9]},
            ],
        }
    )  # fmt: skip


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


def hand_written(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> None:
    """Spec (a) written directly in PySpark, with the same exactly-once Delta MERGE."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
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
        if not batch.isEmpty():
            keys = ["region", "device", "window_start"]
            upsert_rows(batch, table, keys, TxnId(query_id(batch), batch_id))

    query = (
        rows.writeStream.outputMode("update")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .foreachBatch(sink)
        .start()
    )
    query.awaitTermination()


def with_spec(spark: SparkSession, bootstrap: str, topic: str, work: Path) -> None:
    cfg = StreamConfig(
        source=KafkaSource(bootstrap, topic),
        table=str(work / "table"),
        checkpoint=str(work / "checkpoint"),
        max_offsets_per_trigger=PER_TRIGGER,
        spec=spec_a(topic),
    )
    run_stream(spark, cfg)


JOBS = {"spec": with_spec, "hand-written": hand_written}


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_spec", description=__doc__)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=3, help="runs of each job, alternating")
    p.add_argument("--out", type=Path, help="write the runs and medians here (JSON)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-spark-spec-") as tmp, broker(Path(tmp)) as b:
        topic = f"bench-spark-a-{int(time.time())}"
        create_topic(b, topic, 2, 1)
        produce(b, topic, args.records)
        spark = build_session("bench-spark-spec", "local[2]")
        runs: list[dict[str, Any]] = []
        for rep in range(args.reps):
            order = list(JOBS) if rep % 2 == 0 else list(reversed(JOBS))
            for name in order:
                work = Path(tmp) / f"{name}-{rep}"
                start = time.monotonic()
                JOBS[name](spark, b, topic, work)
                seconds = time.monotonic() - start
                run = {"job": name, "rep": rep, "seconds": round(seconds, 2),
                       "records_per_s": round(args.records / seconds)}  # fmt: skip
                print(json.dumps(run), flush=True)
                runs.append(run)
        spark.stop()
    medians = {
        name: statistics.median(r["records_per_s"] for r in runs if r["job"] == name)
        for name in JOBS
    }
    overhead = 1 - medians["spec"] / medians["hand-written"]
    summary = {"records": args.records, "medians_records_per_s": medians, "overhead": overhead}
    print(json.dumps(summary))
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": runs, **summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
