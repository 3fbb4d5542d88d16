"""Spark job options are checked before Spark starts; messages name the option."""

from __future__ import annotations

import inspect
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs import backfill, cli, stream
from spark_jobs.config import KafkaRange, KafkaSource, RecordFields, StreamConfig, WindowSpec
from spark_jobs.errors import JobConfigError
from spark_jobs.faults import AFTER_DELTA_WRITE, AFTER_KAFKA_COMMIT, NO_FAULTS
from spark_jobs.fixed import fixed_spec
from spark_jobs.results import KafkaResults, Marker, ResultsTarget
from spark_jobs.spec import KafkaOutput, OutputSpec
from tests.spark.faulty_stream import FAULT_EXIT_CODE

REPO = Path(__file__).resolve().parents[2]


def _stream_args(*extra: str) -> list[str]:
    return [
        "--bootstrap",
        "b:9092",
        "--topic",
        "out",
        "--table",
        "/t",
        "--checkpoint",
        "/c",
        *extra,
    ]


def test_stream_options_become_a_config_with_read_committed_and_defaults() -> None:
    cfg = stream.config_from(stream.parse_args(_stream_args("--window", "5 minutes")))
    assert cfg.source.isolation_level == "read_committed"
    assert cfg.window == WindowSpec("5 minutes", "10 minutes", 0.05)
    assert cfg.trigger == "available-now"
    assert cfg.bad_table == "/t_bad_records"
    assert cfg.fields == RecordFields("id", "key", "amount", "ts")


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--window", "5 minutez"], "--window"),
        (["--watermark", "0 minutes"], "--watermark"),
        (["--trigger", "sometimes"], "--trigger"),
        (["--max-offsets-per-trigger", "0"], "--max-offsets-per-trigger"),
        (["--distinct-rsd", "0.5"], "--distinct-rsd"),
        (["--id-field", "key"], "--id-field"),
        (["--kafka-option", "security.protocol=SSL"], "--kafka-option"),
        (["--kafka-option", "kafka.isolation.level=read_uncommitted"], "read_committed"),
    ],
)
def test_bad_stream_options_are_refused_naming_the_option(extra: list[str], named: str) -> None:
    with pytest.raises(JobConfigError, match=named):
        stream.config_from(stream.parse_args(_stream_args(*extra)))


def test_interval_trigger_is_accepted() -> None:
    cfg = stream.config_from(stream.parse_args(_stream_args("--trigger", "10 seconds")))
    assert cfg.trigger == "10 seconds"


def test_backfill_range_is_offsets_or_timestamps_never_both() -> None:
    offsets = {"out": {"0": 5}}
    by_offsets = KafkaRange(json.dumps(offsets), json.dumps({"out": {"0": 9}}))
    assert by_offsets.reader_options() == {
        "startingOffsets": '{"out": {"0": 5}}',
        "endingOffsets": '{"out": {"0": 9}}',
    }
    assert KafkaRange(starting_timestamp=1, ending_timestamp=2).reader_options() == {
        "startingTimestamp": "1",
        "endingTimestamp": "2",
    }
    with pytest.raises(JobConfigError, match="either"):
        KafkaRange(starting_offsets="earliest", starting_timestamp=1)
    with pytest.raises(JobConfigError, match="either"):
        KafkaRange()
    with pytest.raises(JobConfigError, match="--ending-offsets is not JSON"):
        KafkaRange("earliest", "{oops")


def test_backfill_window_defaults_to_the_tables() -> None:
    args = ["--bootstrap", "b", "--topic", "out", "--table", "/t", "--starting-timestamp", "1"]
    assert backfill.config_from(backfill.parse_args(args)).window is None


def test_missing_bootstrap_is_named() -> None:
    with pytest.raises(JobConfigError, match="--bootstrap"):
        StreamConfig(source=KafkaSource("", "out"), table="/t", checkpoint="/c")


def test_fault_point_fires_only_at_its_point_of_its_batch() -> None:
    code = (
        "import sys\n"
        "from tests.spark.faulty_stream import CrashAt\n"
        "faults = CrashAt.parse(sys.argv[1])\n"
        f"faults.at({AFTER_DELTA_WRITE!r}, 0)\n"
        f"faults.at({AFTER_DELTA_WRITE!r}, 2)\n"
        "print('survived')\n"
    )
    for spec, want in (
        (f"{AFTER_DELTA_WRITE}:1", 0),
        (f"{AFTER_DELTA_WRITE}:2", FAULT_EXIT_CODE),
        (f"{AFTER_KAFKA_COMMIT}:2", 0),  # another point
    ):
        proc = subprocess.run(
            [sys.executable, "-c", code, spec], cwd=REPO, env={"PATH": "", "PYTHONPATH": str(REPO)},
            capture_output=True, check=False,
        )  # fmt: skip
        assert proc.returncode == want, (spec, proc.stderr)
        assert (b"survived" in proc.stdout) == (want == 0)


def test_the_jobs_own_composition_has_no_fault() -> None:
    NO_FAULTS.at(AFTER_DELTA_WRITE, 0)  # does nothing: the job reads no fault switch
    assert inspect.signature(stream.launch).parameters["faults"].default is NO_FAULTS


def test_the_kafka_results_target_defaults_from_the_job_and_the_bridge_settings() -> None:
    spec = fixed_spec().model_copy(
        update={"name": "daily", "output": OutputSpec(kafka=KafkaOutput(topic="totals"))}
    )
    env = {"BRIDGE_KAFKA__security.protocol": "sasl_ssl", "BRIDGE_SASL_PASSWORD": "s3cret"}
    target = ResultsTarget.of(spec, "b:9092", env)
    assert target is not None
    assert (target.topic, target.batches_topic) == ("totals", "totals.batches")
    assert target.transactional_id == "eos-bridge-spark-daily"
    settings = dict(target.settings)
    assert settings["bootstrap.servers"] == "b:9092"
    assert settings["security.protocol"] == "sasl_ssl"
    assert settings["sasl.password"] == "s3cret" and "s3cret" not in repr(target)
    assert ResultsTarget.of(fixed_spec(), "b:9092", env) is None


def test_the_kafka_fault_points_sigkill_the_process() -> None:
    code = (
        "from tests.spark.faulty_stream import CrashAt\n"
        f"CrashAt({AFTER_KAFKA_COMMIT!r}, 3).at({AFTER_KAFKA_COMMIT!r}, 3)\n"
    )
    env = {"PATH": "", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=False)
    assert proc.returncode == -signal.SIGKILL


def test_a_batch_counts_as_written_only_up_to_its_own_querys_marker() -> None:
    target = ResultsTarget("r", "r.batches", "t", ())
    results = KafkaResults(target, ["user"])
    assert not results.committed("q1", 0)  # nothing committed yet
    results.last = Marker("q1", 4)
    assert results.committed("q1", 4) and results.committed("q1", 0)
    assert not results.committed("q1", 5)
    assert not results.committed("q2", 0)  # a new checkpoint: its batch ids start over


def test_spark_settings_come_from_repeated_conf_options() -> None:
    args = stream.parse_args(
        _stream_args("--conf", "spark.executor.memory=2g", "--conf", "spark.a=x=y")
    )
    assert cli.spark_conf_from(args) == {"spark.executor.memory": "2g", "spark.a": "x=y"}


@pytest.mark.parametrize("bad", ["spark.executor.memory", "executor.memory=2g"])
def test_a_malformed_conf_option_is_named(bad: str) -> None:
    with pytest.raises(JobConfigError, match=f"--conf '{bad}'"):
        cli.spark_conf_from(stream.parse_args(_stream_args("--conf", bad)))


class _Watermarks:
    """A consumer whose end-offset answers are scripted."""

    def __init__(self, *answers: int) -> None:
        self.answers = list(answers)

    def get_watermark_offsets(self, tp: object, timeout: float, cached: bool) -> tuple[int, int]:
        high = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return 0, high


def test_an_end_offset_answered_as_invalid_is_asked_again() -> None:
    """-1001 taken for the end would leave the partition unread and its marker unseen."""
    from confluent_kafka import TopicPartition

    from spark_jobs import results

    consumer = _Watermarks(-1001, 7)
    assert results._high_watermark(consumer, TopicPartition("b", 2)) == 7  # type: ignore[arg-type]


def test_an_end_offset_never_answered_is_one_line_naming_the_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from confluent_kafka import TopicPartition

    from spark_jobs import results
    from spark_jobs.errors import InfrastructureError

    monkeypatch.setattr(results, "TIMEOUT_S", 0.0)
    with pytest.raises(InfrastructureError, match=r"batches_topic b\[2\]: no end offset"):
        results._high_watermark(_Watermarks(-1001), TopicPartition("b", 2))  # type: ignore[arg-type]
