"""Acceptance 5 of issue 31: each mistake and each infrastructure problem ends a job with one
line on stderr, the right exit code, and no Python or Java traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs import stream
from tests.spark.jobs import REPO
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.spark

PROG = "spark_jobs.stream: "


def _spec(tmp_path: Path, topic: str, **changes: object) -> str:
    doc: dict[str, object] = {
        "input": {
            "topics": [topic],
            "fields": [{"name": "user", "type": "string"}, {"name": "n", "type": "long"}],
        },
        "group_by": ["user"],
        "aggregates": [{"name": "total", "fn": "sum", "column": "n"}],
    }
    doc.update(changes)
    path = tmp_path / f"spec-{len(list(tmp_path.glob('spec-*.json')))}.json"  # one per call
    path.write_text(json.dumps(doc))
    return str(path)


def _job(tmp_path: Path, *args: str, module: str = "spark_jobs.stream") -> tuple[int, str]:
    """Run a job as a user would; return its exit code and stderr."""
    extra = ["--checkpoint", str(tmp_path / "ck")] if module == "spark_jobs.stream" else []
    proc = subprocess.run(
        [sys.executable, "-m", module, *extra, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc.returncode, proc.stderr


def assert_one_line(stderr: str, message: str, prog: str = PROG) -> None:
    ours = [line for line in stderr.splitlines() if line.startswith(prog)]
    assert len(ours) == 1, stderr
    assert message in ours[0], stderr
    assert "Traceback" not in stderr, stderr
    assert "\tat " not in stderr and "Caused by" not in stderr, stderr  # no Java frames


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"aggregates": [{"name": "m", "fn": "median", "column": "n"}]}, "unknown aggregate"),
        ({"group_by": ["usr"]}, "group_by: unknown column 'usr'"),
        (
            {"window": {"type": "tumbling", "size": "5 minutez"}},
            '"5 minutez" is not an interval',
        ),
        ({"output": {"merge_keys": []}}, "output.merge_keys misses user"),
    ],
)
def test_spec_mistakes_exit_2_with_one_line(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    spec = _spec(tmp_path, "t", **changes)
    code, stderr = _job(tmp_path, "--bootstrap", "b:9092", "--spec", spec, "--table", "/tmp/x")
    assert code == 2
    assert_one_line(stderr, message)


@pytest.mark.parametrize("module", ["spark_jobs.stream", "spark_jobs.backfill"])
def test_relative_and_unwritable_table_paths_exit_2_with_one_line(
    tmp_path: Path, module: str
) -> None:
    spec = _spec(tmp_path, "t")
    backfill = ["--starting-offsets", "earliest"] if module.endswith("backfill") else []
    prog = f"{module}: "
    for table, message in (
        ("data/agg", "--table data/agg: give an absolute path"),
        ("/proc/agg", "--table /proc/agg: cannot write there"),
        ("/etc/hostname/agg", "--table /etc/hostname/agg: /etc/hostname is not a directory"),
    ):
        args = ["--bootstrap", "b:9092", "--spec", spec, "--table", table, *backfill]
        code, stderr = _job(tmp_path, *args, module=module)
        assert code == 2, stderr
        assert_one_line(stderr, message, prog)


def test_missing_topic_exits_3_with_one_line_and_no_java_trace(
    kafka: KafkaFixture, tmp_path: Path
) -> None:
    missing = kafka.unique("no-such-topic")
    spec = _spec(tmp_path, missing)
    args = ["--bootstrap", kafka.bootstrap, "--spec", spec, "--table", str(tmp_path / "t")]
    code, stderr = _job(tmp_path, *args)
    assert code == 3, stderr
    assert_one_line(stderr, f"--topic {missing}: no such topic")
    assert len(stderr.splitlines()) < 15, stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_broker_and_unknown_column_in_process(
    spark: SparkSession, kafka: KafkaFixture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same paths through ``main`` in this test's Spark session (no second JVM start); and
    a missing Kafka results topic (output.kafka)."""
    topic = kafka.create_topic(kafka.unique("spark-errors"), partitions=1)
    dead = f"127.0.0.1:{_closed_port()}"
    results = {"kafka": {"topic": kafka.unique("no-such-results")}}
    cases = [
        (
            [
                "--bootstrap", dead, "--spec", _spec(tmp_path, topic),
                "--kafka-option", "kafka.default.api.timeout.ms=3000",
                "--kafka-option", "kafka.request.timeout.ms=3000",
            ],
            3,
            f"--bootstrap {dead}: no broker answered",
        ),
        (
            ["--bootstrap", kafka.bootstrap, "--spec", _spec(tmp_path, topic, filter="nn > 1")],
            2,
            "spec filter: [UNRESOLVED_COLUMN",
        ),
        (
            ["--bootstrap", kafka.bootstrap, "--spec", _spec(tmp_path, topic, output=results)],
            3,
            f"output.kafka.topic {results['kafka']['topic']}: no such topic on {kafka.bootstrap}",
        ),

    ]  # fmt: skip
    for args, want_code, message in cases:
        table = ["--table", str(tmp_path / f"t{want_code}"), "--checkpoint", str(tmp_path / "c")]
        code = stream.main([*args, *table, "--master", ""])
        stderr = capsys.readouterr().err
        assert code == want_code, stderr
        assert_one_line(stderr, message)
