"""The Spark image runs the chart's CronJob command, and the SparkApplication's driver through
its entrypoint, and both aggregate the committed output.

Run by `make test-spark-image`, not `make test`: the image holds a JRE and pyspark (~1 GB, several
minutes to build the first time), and the Spark jobs have their own tests in tests/spark. This
one checks the packaging: Dockerfile.spark builds on the local Debian base from
requirements/spark.lock, the jars are found through EOS_SPARK_JARS_DIR without Maven, the exact
command and arguments `helm template` renders for the CronJob run in it as uid 10001 and fill
the Delta table, and so does its entrypoint's `driver` (what the Spark Operator's driver pod
runs) with the SparkApplication's file, settings and arguments, on local[1] instead of k8s://.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, Manifest, one
from .test_image import SPARK_LOCK, image_config, installed, locked_pins

# Not in `make test` (it builds a ~1 GB image: minutes on a 2-core machine); its own command is
# `make test-spark-image`. Deselected there by marker, not skipped: it is never counted as run.
pytestmark = [pytest.mark.image, pytest.mark.spark_image]

IMAGE = "localhost/eos-bridge-spark:image-test"
UID = 10001
DATA = "/var/lib/eos-bridge/spark"
RECORDS = 200

# Reads the job's Delta table back inside the same image.
READ_TABLE = """
import json
from spark_jobs.session import build_session
spark = build_session("check", "local[1]")
rows = spark.read.format("delta").load("{table}").collect()
print("RESULT " + json.dumps({{"count": sum(r.record_count for r in rows),
                               "amount": sum(r.amount_sum for r in rows)}}))
"""


def sh(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr[-4000:]}")
    return result


@pytest.fixture(scope="module")
def spark_image() -> str:
    base = sh(str(REPO / "tools" / "image" / "build_base.sh"), timeout=900).stdout.split()[-1]
    sh(
        "buildah", "bud", "--isolation=chroot", "--layers", "--pull-never",
        "--build-arg", f"BASE_IMAGE={base}",
        "--file", str(REPO / "Dockerfile.spark"), "--tag", IMAGE, str(REPO),
        timeout=1800,
    )  # fmt: skip
    return IMAGE


@pytest.fixture()
def spark_container(spark_image: str) -> Iterator[str]:
    name = f"eos-bridge-spark-test-{uuid.uuid4().hex[:8]}"
    sh("buildah", "from", "--pull-never", "--name", name, spark_image)
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False, timeout=60)


def run_in(container: str, data: Path, env: dict[str, str], argv: list[str]) -> str:
    env_args = [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
    return sh(
        "buildah", "run", "--isolation=chroot", "--user", f"{UID}:{UID}",
        "--volume", f"{data}:{DATA}:rw", *env_args, container, "--", *argv,
        timeout=600,
    ).stdout  # fmt: skip


def seeded_topic(kafka: Any) -> str:
    topic: str = kafka.create_topic(partitions=2)
    start_ms = int(time.time() * 1000)
    docs = [
        {"id": str(i), "key": f"k{i % 5}", "amount": i, "ts": start_ms + i} for i in range(RECORDS)
    ]
    kafka.seed(topic, [json.dumps(d).encode() for d in docs])
    return topic


def data_volume(tmp_path: Path, resources: list[Manifest]) -> tuple[Path, dict[str, str]]:
    """The job's volume, owned by uid 10001, holding the bridge's config file (security
    settings) that a pod mounts from the ConfigMap; and the variables pointing at it."""
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, UID, UID)
    config = one(resources, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"]
    (data / "config.yaml").write_text(config)
    # buildah's chroot has the host's hostname but not its /etc/hosts entry; a pod has both.
    return data, {"BRIDGE_CONFIG_FILE": f"{DATA}/config.yaml", "SPARK_LOCAL_IP": "127.0.0.1"}


def assert_table_totals(container: str, data: Path, env: dict[str, str], table: str) -> None:
    result = run_in(container, data, env, ["python", "-c", READ_TABLE.format(table=table)])
    line = next(x for x in result.splitlines() if x.startswith("RESULT "))
    totals = json.loads(line.removeprefix("RESULT "))
    assert totals == {"count": RECORDS, "amount": float(sum(range(RECORDS)))}


def test_image_config_and_installed_distributions(spark_image: str) -> None:
    """Exec-form entrypoint (Spark on Kubernetes' driver/executor), uid 10001, and exactly the
    distributions of requirements/spark.lock plus the project: no pip, setuptools or wheel."""
    config = image_config(spark_image)
    assert config["Entrypoint"] == ["/usr/local/bin/eos-spark-entrypoint"]
    assert config["User"] == f"{UID}:{UID}"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["EOS_SPARK_JARS_DIR"] == "/opt/spark-jars"
    assert "SPARK_HOME" not in env, "the entrypoint finds the pip pyspark's"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert installed(spark_image) == {**locked_pins(SPARK_LOCK), "eos-bridge": project["version"]}


def bridge_sets(kafka: Any, topic: str, *extra: str) -> list[str]:
    """Chart values pointing the bridge at the test broker, ``topic`` as its output."""
    return [
        f"bridge.bootstrapServers={kafka.bootstrap}",
        "bridge.inputTopics={in}",
        f"bridge.outputTopic={topic}",
        *extra,
    ]


def test_cronjob_command_aggregates_committed_output(
    kafka: Any,
    manifests: Callable[..., list[Manifest]],
    spark_container: str,
    tmp_path: Path,
) -> None:
    topic = seeded_topic(kafka)
    resources = manifests(sets=bridge_sets(kafka, topic, "spark.enabled=true"))
    cron = one(resources, "CronJob")
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    # `command` replaces the image's entrypoint: the CronJob runs python directly.
    assert container["command"][0] == "python"
    data, env = data_volume(tmp_path, resources)
    env = {**{e["name"]: e["value"] for e in container["env"] if "value" in e}, **env}

    out = run_in(spark_container, data, env, [*container["command"], *container["args"]])

    assert "stream summary" in out
    args = container["args"]
    assert_table_totals(spark_container, data, env, args[args.index("--table") + 1])


def test_spark_application_driver_runs_through_the_entrypoint(
    kafka: Any,
    manifests: Callable[..., list[Manifest]],
    spark_container: str,
    tmp_path: Path,
) -> None:
    """What the operator's driver pod runs: the entrypoint's `driver` with spark-submit's
    options, the SparkApplication's mainApplicationFile (a local:// path in the image) and
    arguments; the master is local[1] instead of k8s:// and the trigger available-now (the
    application's runs until stopped)."""
    topic = seeded_topic(kafka)
    resources = manifests(
        sets=bridge_sets(
            kafka,
            topic,
            "sparkApplication.enabled=true",
            "sparkApplication.storage.claimName=spark-rwx",
        )
    )
    spec = one(resources, "SparkApplication")["spec"]
    args = list(spec["arguments"])
    args[args.index("--trigger") + 1] = "available-now"
    conf = [a for key, value in spec["sparkConf"].items() for a in ("--conf", f"{key}={value}")]
    data, env = data_volume(tmp_path, resources)
    env["SPARK_DRIVER_BIND_ADDRESS"] = "127.0.0.1"  # the pod's IP, set by Spark on Kubernetes
    driver = ["driver", "--master", "local[1]", *conf, spec["mainApplicationFile"], *args]

    out = run_in(spark_container, data, env, ["/usr/local/bin/eos-spark-entrypoint", *driver])

    assert "stream summary" in out
    assert_table_totals(spark_container, data, env, args[args.index("--table") + 1])
