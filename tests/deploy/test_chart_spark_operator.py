"""The SparkApplication (Spark Operator, sparkoperator.k8s.io/v1beta2): off by default; when on,
its fields are the operator's, its pod parts validate as Kubernetes objects, and the streaming
job accepts its arguments.

The operator's CRD is not bundled with kubernetes-validate, so the custom resource itself is
checked against the v1beta2 field names below and its embedded core objects (volumes, env,
mounts, security contexts) are validated strictly inside a Pod built from them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .helpers import CHART, HelmError, Manifest, one
from .test_chart import DEFAULT, KUBE_VERSIONS, kubernetes_validate

pytestmark = pytest.mark.chart

OPERATOR = CHART / "ci" / "spark-operator-values.yaml"
MOUNT = "/var/lib/eos-bridge/spark"

# Field names of the operator's v1beta2 API (SparkApplicationSpec, DriverSpec, ExecutorSpec).
SPEC_FIELDS = {
    "type", "sparkVersion", "mode", "proxyUser", "image", "imagePullPolicy", "imagePullSecrets",
    "mainClass", "mainApplicationFile", "arguments", "sparkConf", "hadoopConf", "volumes",
    "driver", "executor", "deps", "restartPolicy", "nodeSelector", "pythonVersion",
    "memoryOverheadFactor", "monitoring", "timeToLiveSeconds", "sparkUIOptions",
    "dynamicAllocation", "sparkConfigMap", "hadoopConfigMap", "batchScheduler",
}  # fmt: skip
POD_FIELDS = {
    "cores", "coreLimit", "coreRequest", "memory", "memoryOverhead", "image", "env", "envFrom",
    "labels", "annotations", "volumeMounts", "affinity", "tolerations", "podSecurityContext",
    "securityContext", "nodeSelector", "serviceAccount", "javaOptions", "instances",
    "priorityClassName", "terminationGracePeriodSeconds", "sidecars", "initContainers",
}  # fmt: skip


def application(manifests: Callable[..., list[Manifest]], *sets: str) -> Manifest:
    return one(manifests(OPERATOR, sets=list(sets)), "SparkApplication")


def test_no_spark_application_unless_asked(manifests: Callable[..., list[Manifest]]) -> None:
    assert not [r for r in manifests(DEFAULT) if r["kind"] == "SparkApplication"]


def test_the_claim_is_required(template: Callable[..., str]) -> None:
    with pytest.raises(HelmError, match=r"sparkApplication\.storage\.claimName"):
        template(DEFAULT, sets=["sparkApplication.enabled=true"])


def test_fields_are_the_operators(manifests: Callable[..., list[Manifest]]) -> None:
    app = application(manifests)
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    spec = app["spec"]
    assert set(spec) <= SPEC_FIELDS, set(spec) - SPEC_FIELDS
    assert (spec["type"], spec["mode"]) == ("Python", "cluster")
    for role in ("driver", "executor"):
        assert set(spec[role]) <= POD_FIELDS, (role, set(spec[role]) - POD_FIELDS)
    assert all(isinstance(v, str) for v in spec["sparkConf"].values())


def test_the_job_accepts_its_arguments(manifests: Callable[..., list[Manifest]]) -> None:
    from spark_jobs.stream import parse_args

    spec = application(manifests)["spec"]
    assert spec["mainApplicationFile"].endswith("/spark_jobs/stream.py")
    parsed = parse_args(spec["arguments"])
    assert parsed.master == "", "the job must keep the master spark-submit set"
    assert parsed.topic == "payments-out"
    assert parsed.trigger == "1 minute"  # a long-running stream, restarted by the operator
    assert parsed.table.startswith(MOUNT) and parsed.checkpoint.startswith(MOUNT)


def test_driver_and_executors_share_the_claim(manifests: Callable[..., list[Manifest]]) -> None:
    spec = application(manifests)["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "eos-bridge-spark-rwx"
    for role in ("driver", "executor"):
        mounts = {m["mountPath"]: m["name"] for m in spec[role]["volumeMounts"]}
        assert mounts[MOUNT] == "data", role
        assert spec[role]["securityContext"]["readOnlyRootFilesystem"] is True
    # Credentials only where they are read: the driver builds the Kafka options.
    names = {role: {e["name"] for e in spec[role]["env"]} for role in ("driver", "executor")}
    assert "BRIDGE_SASL_PASSWORD" in names["driver"]
    assert "BRIDGE_SASL_PASSWORD" not in names["executor"]


@pytest.mark.parametrize("role", ["driver", "executor"])
def test_pod_parts_validate_strict(
    manifests: Callable[..., list[Manifest]], tmp_path: Path, role: str
) -> None:
    """The core objects inside the custom resource, as the operator puts them into pods."""
    spec = application(manifests, "tls.enabled=true", "tls.caSecret=kafka-ca")["spec"]
    part = spec[role]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"spark-{role}", "labels": part["labels"]},
        "spec": {
            "serviceAccountName": part.get("serviceAccount", "default"),
            "securityContext": part["podSecurityContext"],
            "volumes": spec["volumes"],
            "containers": [
                {
                    "name": f"spark-kubernetes-{role}",
                    "image": spec["image"],
                    "env": part["env"],
                    "volumeMounts": part["volumeMounts"],
                    "securityContext": part["securityContext"],
                }
            ],
        },
    }
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    result = kubernetes_validate(path, KUBE_VERSIONS[-1])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"passed for resource pod/spark-{role}" in result.stdout
    assert {"name": "kafka-tls", "mountPath": "/etc/eos-bridge/tls", "readOnly": True} in part[
        "volumeMounts"
    ]
