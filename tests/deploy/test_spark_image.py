"""The Spark image runs the chart's CronJob command and aggregates the committed output.

Run by `make test-spark-image`, not `make test`: the image holds a JRE and pyspark (~1 GB, several
minutes to build the first time), and the Spark jobs have their own tests in tests/spark. This
one checks the packaging: Dockerfile.spark builds on the local Debian base, the jars are found
through EOS_SPARK_JARS_DIR without Maven, and the exact command and arguments `helm template`
renders for the CronJob run in it as uid 10001 and fill the Delta table.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, Manifest, one

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


def test_cronjob_command_aggregates_committed_output(
    kafka: Any,
    manifests: Callable[..., list[Manifest]],
    spark_container: str,
    tmp_path: Path,
) -> None:
    topic = kafka.create_topic(partitions=2)
    start_ms = int(time.time() * 1000)
    docs = [
        {"id": str(i), "key": f"k{i % 5}", "amount": i, "ts": start_ms + i} for i in range(RECORDS)
    ]
    kafka.seed(topic, [json.dumps(d).encode() for d in docs])

    resources = manifests(
        sets=[
            f"bridge.bootstrapServers={kafka.bootstrap}",
            "bridge.inputTopics={in}",
            f"bridge.outputTopic={topic}",
            "spark.enabled=true",
        ]
    )
    cron = one(resources, "CronJob")
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    # buildah's chroot has the host's hostname but not its /etc/hosts entry; a pod has both.
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, UID, UID)
    # The job reads the bridge's config file (security settings) as the pod does from the
    # ConfigMap; here it sits on the data volume.
    config = one(resources, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"]
    (data / "config.yaml").write_text(config)
    env["BRIDGE_CONFIG_FILE"] = f"{DATA}/config.yaml"

    out = run_in(spark_container, data, env, [*container["command"], *container["args"]])

    assert "stream summary" in out
    args = container["args"]
    table = args[args.index("--table") + 1]
    script = READ_TABLE.format(table=table)
    result = run_in(spark_container, data, env, ["python", "-c", script])
    line = next(x for x in result.splitlines() if x.startswith("RESULT "))
    totals = json.loads(line.removeprefix("RESULT "))
    assert totals == {"count": RECORDS, "amount": float(sum(range(RECORDS)))}
