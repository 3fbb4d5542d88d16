"""What the driver-crash tests share: a topic of bridge-like transactions, the streaming job run
as its own process until a fault point ends it, where the crash landed in Spark's checkpoint,
the restart in this process's Spark session, and the table against the reference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_jobs.config import KafkaSource, StreamConfig
from spark_jobs.stream import StreamSummary, run_stream
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import (
    WINDOW_MS,
    chunks,
    first_window_ms,
    make_events,
    produce_in_transactions,
)
from tests.spark.jobs import run_module, tail
from tests.spark.reference import aggregate
from tests.spark.tables import read_table
from tests.support.kafka import KafkaFixture

RSD = 0.05
MAX_OFFSETS = 100  # offsets per micro-batch: a crash hits a batch in the middle of the topic
SIGKILLED = -9
TIMEOUT_S = 600  # a hang guard for one crashed run, not a speed requirement


def seeded_topic(kafka: KafkaFixture, prefix: str, seed: int, events: int = 300) -> str:
    """A two-partition topic of ``events`` bridge-like records in committed transactions of 60
    (every transaction marker is an offset too: ``events // 60`` more offsets)."""
    topic = kafka.create_topic(kafka.unique(prefix), partitions=2)
    batches = chunks(make_events(events, seed=seed, t0_ms=first_window_ms()), 60)
    produce_in_transactions(kafka, topic, batches)
    return topic


@dataclass(slots=True)
class CrashingJob:
    """The stream job over ``topic`` into ``workdir``'s table and checkpoint; ``job_args`` are
    the aggregate's options (``--spec``, or the fixed aggregate's ``--window``...)."""

    kafka: KafkaFixture
    topic: str
    workdir: Path
    job_args: Sequence[str]

    @property
    def table(self) -> Path:
        return self.workdir / "table"

    @property
    def checkpoint(self) -> Path:
        return self.workdir / "checkpoint"

    def crash(self, point: str, batch: int, exit_code: int) -> None:
        """Run the job as its own process (a new driver) until ``point`` of batch ``batch``
        ends it with ``exit_code``; the batch must be started in the checkpoint, not done."""
        args = [
            *self.job_args, "--bootstrap", self.kafka.bootstrap, "--topic", self.topic,
            "--table", str(self.table), "--checkpoint", str(self.checkpoint),
            "--max-offsets-per-trigger", str(MAX_OFFSETS),
        ]  # fmt: skip
        log = self.workdir / f"crashed-run-{batch}-{point}.log"
        crash = ["--crash", f"{point}:{batch}"]
        code = run_module("tests.spark.faulty_stream", [*crash, *args], {}, log, TIMEOUT_S)
        assert code == exit_code, tail(log)
        queries = self.checkpoint / "aggregates"
        assert (queries / "offsets" / str(batch)).exists(), f"batch {batch} never started"
        assert not (queries / "commits" / str(batch)).exists(), f"batch {batch} completed"
        # The batch before it was completed by this driver (a replay, after an earlier crash).
        assert batch == 0 or (queries / "commits" / str(batch - 1)).exists()

    def restart(self, spark: SparkSession, **config: Any) -> StreamSummary:
        """The restart, to the end of the topic, in this process's Spark session; it must
        begin with the interrupted batch (Spark replays it)."""
        offsets = self.checkpoint / "aggregates" / "offsets"
        started = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
        summary = run_stream(spark, self.config(**config))
        assert summary.batch_ids[0] == started, "Spark did not replay the interrupted batch"
        return summary

    def config(self, **config: Any) -> StreamConfig:
        return StreamConfig(
            source=KafkaSource(self.kafka.bootstrap, self.topic),
            table=str(self.table),
            checkpoint=str(self.checkpoint),
            max_offsets_per_trigger=MAX_OFFSETS,
            **config,
        )

    def assert_table_is_reference(self, spark: SparkSession) -> None:
        """The table equals the plain-Python aggregate of the topic's committed records."""
        expected = aggregate(self.kafka.read_all(self.topic), WINDOW_MS)
        assert_same_aggregates(read_table(spark, self.table), expected, RSD)
