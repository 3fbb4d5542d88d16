"""Several Spark jobs from values (spark.jobs): one CronJob, or one SparkApplication, per job,
each with its own spec file, checkpoint and table; the jobs accept their arguments and specs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

import pytest
import yaml

from .helpers import CHART, HelmError, Manifest, one
from .test_chart import DEFAULT

pytestmark = pytest.mark.chart

JOBS = CHART / "ci" / "spark-jobs-values.yaml"
OPERATOR = CHART / "ci" / "spark-operator-values.yaml"
NAMES = ("sliding-average", "totals")


def _specs(resources: list[Manifest]) -> dict[str, str]:
    data: dict[str, str] = one(resources, "ConfigMap", "demo-eos-bridge-spark-specs")["data"]
    return data


def _check_job(args: list[str], mounts: dict[str, str], specs: dict[str, str], name: str) -> None:
    """The job's arguments parse, its spec is the mounted file of its own, and its checkpoint
    and table are its own."""
    from spark_jobs import stream
    from spark_jobs.spec import parse_spec

    parsed = stream.parse_args(args)
    spec_path = PurePosixPath(parsed.spec)
    assert mounts[str(spec_path.parent)] == "specs"
    spec = parse_spec(yaml.safe_load(specs[spec_path.name]), spec_path.name)
    assert spec.name == name  # the Kafka results sink's transactional id comes from it
    assert parsed.checkpoint.endswith(f"/{name}/checkpoint")
    assert parsed.table.endswith(f"/{name}/table")
    # No topic in the spec: the bridge's output topic.
    assert parsed.topic == (None if spec.input.topics else "orders-out")


def test_one_cronjob_per_job_with_its_own_spec_checkpoint_and_table(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(JOBS)
    jobs = {r["metadata"]["name"]: r for r in resources if r["kind"] == "CronJob"}
    assert sorted(jobs) == [f"demo-eos-bridge-spark-{n}" for n in NAMES]
    specs = _specs(resources)
    assert sorted(specs) == [f"{n}.yaml" for n in NAMES]
    for name in NAMES:
        cron = jobs[f"demo-eos-bridge-spark-{name}"]
        pod = cron["spec"]["jobTemplate"]["spec"]["template"]
        container = pod["spec"]["containers"][0]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        _check_job(container["args"], mounts, specs, name)
        assert "checksum/spec" in pod["metadata"]["annotations"]
    assert jobs["demo-eos-bridge-spark-sliding-average"]["spec"]["schedule"] == "*/5 * * * *"
    assert jobs["demo-eos-bridge-spark-totals"]["spec"]["schedule"] == "*/15 * * * *"
    totals = jobs["demo-eos-bridge-spark-totals"]["spec"]["jobTemplate"]["spec"]["template"]
    assert totals["spec"]["containers"][0]["args"][-2:] == ["--max-offsets-per-trigger", "50000"]


def test_a_changed_spec_changes_only_its_jobs_checksum(
    manifests: Callable[..., list[Manifest]],
) -> None:
    def checksums(*sets: str) -> dict[str, str]:
        return {
            r["metadata"]["name"]: r["spec"]["jobTemplate"]["spec"]["template"]["metadata"][
                "annotations"
            ]["checksum/spec"]
            for r in manifests(JOBS, sets=list(sets))
            if r["kind"] == "CronJob"
        }

    before = checksums()
    after = checksums("spark.jobs[1].spec.aggregates[0].name=sum_amount")
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"demo-eos-bridge-spark-totals"}


def test_one_spark_application_per_job(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(OPERATOR, JOBS, sets=["spark.enabled=false"])
    assert not [r for r in resources if r["kind"] == "CronJob"]
    apps = {r["metadata"]["name"]: r for r in resources if r["kind"] == "SparkApplication"}
    assert sorted(apps) == [f"demo-eos-bridge-spark-{n}" for n in NAMES]
    specs = _specs(resources)
    for name in NAMES:
        spec = apps[f"demo-eos-bridge-spark-{name}"]["spec"]
        assert {"name": "specs", "configMap": {"name": "demo-eos-bridge-spark-specs"}} in spec[
            "volumes"
        ]
        mounts = {m["mountPath"]: m["name"] for m in spec["driver"]["volumeMounts"]}
        _check_job(spec["arguments"], mounts, specs, name)
        assert "specs" not in {m["name"] for m in spec["executor"]["volumeMounts"]}


def test_without_jobs_the_single_job_is_unchanged(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(DEFAULT, sets=["spark.enabled=true"])
    assert [r["metadata"]["name"] for r in resources if r["kind"] == "CronJob"] == [
        "demo-eos-bridge-spark"
    ]
    assert not [r for r in resources if r["metadata"]["name"].endswith("-spark-specs")]


def test_both_workloads_for_the_same_jobs_are_refused(template: Callable[..., str]) -> None:
    with pytest.raises(HelmError, match="not both: one writer per table"):
        template(OPERATOR, JOBS)


@pytest.mark.parametrize("bad", ["Totals", "totals_2", "-totals"])
def test_a_job_name_must_be_a_dns_label(template: Callable[..., str], bad: str) -> None:
    with pytest.raises(HelmError, match="name"):
        template(JOBS, sets=[f"spark.jobs[1].name={bad}"])
