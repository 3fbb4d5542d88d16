"""The Spark image's entrypoint (deploy/spark/entrypoint.sh) against the real spark-submit, JVM
and executor backend of the pip pyspark, without Kubernetes.

`driver` runs the streaming job through spark-submit exactly as the driver pod would (client
deploy mode, bound to the given address; only the master is local instead of k8s://), so the
jars of EOS_SPARK_JARS_DIR must reach the already-running driver JVM. `executor` starts the
Kubernetes executor backend with the variables a pod gets; with no driver to register with,
it must get as far as connecting to it, which it does only if it accepted its arguments.
tests/unit/test_spark_entrypoint.py checks the exact command lines with stubs.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.jars import ensure_jars
from tests.spark.compare import assert_same_aggregates
from tests.spark.data import (
    WINDOW_MS,
    chunks,
    first_window_ms,
    make_events,
    produce_in_transactions,
)
from tests.spark.jobs import REPO, run_command, tail
from tests.spark.reference import aggregate
from tests.spark.tables import read_table
from tests.support.kafka import KafkaFixture

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]

ENTRYPOINT = REPO / "deploy" / "spark" / "entrypoint.sh"
JOB_TIMEOUT = 900
RSD = 0.05  # the job's default --distinct-rsd


def pod_env() -> dict[str, str]:
    """What the image provides: the venv's python3 first on PATH (SPARK_HOME is found through
    it, and spark-submit runs the job with it), our jars' directory, no SPARK_HOME."""
    return {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "EOS_SPARK_JARS_DIR": str(ensure_jars()[0].parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def test_driver_runs_the_stream_job_through_spark_submit(
    spark: SparkSession, kafka: KafkaFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    topic = kafka.create_topic(kafka.unique("spark-driver"), partitions=2)
    produce_in_transactions(kafka, topic, chunks(make_events(120, 7, first_window_ms()), 40))
    table = tmp_path / "table"
    argv = [
        "bash", str(ENTRYPOINT), "driver", "--master", "local[1]",
        # As the SparkApplication's sparkConf: with spark-submit's master the job applies none
        # of its local defaults, and Spark's 200 shuffle partitions take minutes here.
        "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.ui.enabled=false",
        str(REPO / "spark_jobs" / "stream.py"),
        "--bootstrap", kafka.bootstrap, "--topic", topic, "--table", str(table),
        "--checkpoint", str(tmp_path / "checkpoint"), "--watermark", "30 minutes",
        "--master", "",  # as the SparkApplication passes it: keep spark-submit's master
    ]  # fmt: skip
    env = {**pod_env(), "SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1", "PYTHONPATH": str(REPO)}

    log = tmp_path / "driver.log"
    assert run_command(argv, env, log, JOB_TIMEOUT) == 0, tail(log)

    assert "stream summary" in log.read_text()
    expected = aggregate(kafka.read_all(topic), WINDOW_MS)
    assert_same_aggregates(read_table(spark, table), expected, RSD)


def test_executor_backend_accepts_the_pod_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    # A bound port nobody listens on: the connection to the "driver" is refused at once.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        env = {
            **pod_env(),
            "SPARK_DRIVER_URL": f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
            "SPARK_EXECUTOR_ID": "1",
            "SPARK_EXECUTOR_CORES": "1",
            "SPARK_EXECUTOR_MEMORY": "256m",
            "SPARK_APPLICATION_ID": "spark-entrypoint-test",
            "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
            "SPARK_EXECUTOR_POD_NAME": "eos-bridge-spark-exec-1",
            "SPARK_RESOURCE_PROFILE_ID": "0",
            "SPARK_JAVA_OPT_0": f"-Djava.io.tmpdir={tmp_path}",
        }
        log = tmp_path / "executor.log"
        code = run_command(["bash", str(ENTRYPOINT), "executor"], env, log, 300)

    out = log.read_text()
    assert code != 0, "no driver to register with"
    assert "Usage: KubernetesExecutorBackend" not in out and "Unrecognized" not in out, out
    assert "KubernetesExecutorBackend: Started daemon" in out, out
    assert f"Failed to connect to /127.0.0.1:{port}" in out, tail(log)
