"""The fetched jars: what the jobs need, nothing pyspark already ships, no Maven on reuse."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest

from spark_jobs.jars import ensure_jars

pytestmark = pytest.mark.spark

# artifact-1.2.3[-suffix].jar; greedy, so "spark-sql-kafka-0-10_2.13-4.2.0.jar" splits right.
_VERSIONED = re.compile(r"^(?P<artifact>.+)-\d+\.\d[\w.\-]*\.jar$")


def _artifact(jar: Path) -> str:
    match = _VERSIONED.match(jar.name)
    assert match, jar.name
    return match["artifact"]


def test_jars_hold_the_kafka_source_avro_and_delta_and_nothing_pyspark_ships() -> None:
    ours = {_artifact(j) for j in ensure_jars()}
    assert {
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
        "delta-storage",
        "spark-avro_2.13",  # from_avro (spark_jobs.avro_input)
    } <= ours
    assert any(a.startswith("delta-spark_") for a in ours)
    shipped = {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert not ours & shipped, f"already in pyspark/jars: {sorted(ours & shipped)}"


def test_the_kafka_source_matches_the_installed_spark_version() -> None:
    kafka_source = [j.name for j in ensure_jars() if j.name.startswith("spark-sql-kafka")]
    assert kafka_source == [f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"]
