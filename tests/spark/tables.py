"""Reading back what the jobs wrote: table rows and the Delta log's transaction ids."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tests.spark.reference import WindowKey, WindowStats


def read_table(
    spark: SparkSession, path: Path, version: int | None = None
) -> dict[WindowKey, WindowStats]:
    """The aggregate table (optionally as of a Delta version) in the reference's shape."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return collect_windows(reader.load(str(path)))


def collect_windows(rows_df: DataFrame) -> dict[WindowKey, WindowStats]:
    """Aggregate rows as (key, window start ms) → stats; a duplicate row fails."""
    table = {}
    for r in rows_df.selectExpr("*", "unix_millis(window_start) AS start_ms").collect():
        assert (r.key, r.start_ms) not in table, f"duplicate row for {(r.key, r.start_ms)}"
        table[(r.key, r.start_ms)] = WindowStats(
            r.record_count, r.amount_sum, r.distinct_ids, r.amount_p50, r.amount_p95, r.amount_p99
        )
    return table


def delta_txns(path: Path) -> list[tuple[int, str, int]]:
    """(table version, txn app id, txn version) of every idempotent commit, from the log files."""
    found = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found.append((int(commit.stem), action["txn"]["appId"], action["txn"]["version"]))
    return found


def latest_version(path: Path) -> int:
    """The newest Delta table version, from the log file names."""
    return max(int(p.stem) for p in (path / "_delta_log").glob("*.json"))
