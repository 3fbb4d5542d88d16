"""The Helm chart renders, lints and validates, and renders what an operator expects.

Every `ci/*-values.yaml` is linted with the pinned helm (tools/helm.sh) and its rendering is
validated offline with `kubernetes-validate --strict` against the Kubernetes versions below.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_settings
from app.engine.tasks import task_id_prefix

from .helpers import CHART, NAMESPACE, REPO, HelmError, Manifest, one, run_helm

pytestmark = pytest.mark.chart

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
DEFAULT = CHART / "ci" / "default-values.yaml"
NO_PERSISTENCE = CHART / "ci" / "persistence-off-values.yaml"
SPARK = CHART / "ci" / "spark-values.yaml"
SASL = CHART / "ci" / "sasl-values.yaml"
SERVICEMONITOR = CHART / "ci" / "servicemonitor-values.yaml"
REGISTRY = CHART / "ci" / "registry-values.yaml"
TWO_CLUSTERS = CHART / "ci" / "two-clusters-values.yaml"

# kubernetes-validate 1.37.0 bundles schemas for 1.25 to 1.37: the issue's target 1.36, the newest
# bundled 1.37, and 1.34, the oldest minor release still in upstream support.
KUBE_VERSIONS = ["1.34.0", "1.36.0", "1.37.0"]
# Custom resources have no bundled schema; kubernetes-validate warns and skips them.
CRD_KINDS = {"ServiceMonitor", "SparkApplication", "PrometheusRule"}

STATE_DIR = "/var/lib/eos-bridge/state"


def ci_id(path: Path) -> str:
    return path.name.removesuffix("-values.yaml")


def test_every_ci_values_set_is_covered() -> None:
    assert {ci_id(p) for p in CI_VALUES} == {
        "default",
        "mtls",
        "observability",
        "persistence-off",
        "registry",
        "spark",
        "sasl",
        "servicemonitor",
        "spark-operator",
        "spark-jobs",
        "two-clusters",
    }


# --- helm lint / kubernetes-validate ---------------------------------------------------------


@pytest.mark.parametrize("values", CI_VALUES, ids=ci_id)
def test_helm_lint_strict(helm: str, values: Path) -> None:
    out = run_helm(helm, ["lint", "--strict", str(CHART), "--values", str(values)])
    assert "0 chart(s) failed" in out


def kubernetes_validate(path: Path, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", version, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", CI_VALUES, ids=ci_id)
def test_rendered_manifests_validate_strict(
    template: Callable[..., str], tmp_path: Path, values: Path, version: str
) -> None:
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(template(values, kube_version=version))
    resources = [doc for doc in yaml.safe_load_all(rendered.read_text()) if doc]

    result = kubernetes_validate(rendered, version)

    assert result.returncode == 0, result.stdout + result.stderr
    passed = re.findall(r"^INFO .* passed for resource (\S+) against", result.stdout, re.M)
    expected = [
        f"{r['kind'].lower()}/{r['metadata']['name']}"
        for r in resources
        if r["kind"] not in CRD_KINDS
    ]
    assert sorted(passed) == sorted(expected), result.stdout


def test_strict_validation_catches_a_misplaced_field(
    template: Callable[..., str], tmp_path: Path
) -> None:
    """The validation step can fail: an unknown field in a volume mount is an error."""
    rendered = tmp_path / "bad.yaml"
    rendered.write_text(
        template(
            DEFAULT,
            sets=[
                "extraVolumeMounts[0].name=tmp",
                "extraVolumeMounts[0].mountPath=/scratch",
                "extraVolumeMounts[0].readonly=true",
            ],
        )
    )

    result = kubernetes_validate(rendered, KUBE_VERSIONS[-1])

    assert result.returncode != 0
    assert "readonly" in result.stdout


# --- schema ------------------------------------------------------------------------------------


def walk_schema(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, prop in node.get("properties", {}).items():
        yield f"{path}.{name}", prop
        yield from walk_schema(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield f"{path}[]", node["items"]
        yield from walk_schema(node["items"], f"{path}[]")


def test_schema_describes_every_property() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    undocumented = [path for path, prop in walk_schema(schema, "") if not prop.get("description")]
    assert undocumented == []


def test_schema_covers_every_default_value() -> None:
    """additionalProperties is false on our own maps, so every key of values.yaml is declared."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])
    for group in (
        "image", "bridge", "sasl", "tls", "persistence", "serviceAccount", "networkPolicy",
        "tests", "spark", "sparkApplication", "target",
    ):  # fmt: skip
        assert set(values[group]) == set(schema["properties"][group]["properties"]), group


@pytest.mark.parametrize(
    ("bad", "setting"),
    [
        ("replicaCount=two", "replicaCount"),
        ("bridge.processingGuarantee=twice", "processingGuarantee"),
        ("bridge.groupProtocol=eager", "groupProtocol"),
        ("bridge.bootstrapServer=kafka:9092", "bootstrapServer"),
        ("persistence.size=lots", "size"),
    ],
)
def test_schema_rejects_bad_values(template: Callable[..., str], bad: str, setting: str) -> None:
    with pytest.raises(HelmError) as failure:
        template(DEFAULT, sets=[bad])
    message = str(failure.value)
    assert "values don't meet the specifications of the schema" in message
    assert setting in message


def test_missing_required_setting_is_named(template: Callable[..., str]) -> None:
    with pytest.raises(HelmError, match=r"bridge\.bootstrapServers is required"):
        template()
    with pytest.raises(HelmError, match=r"sasl\.existingSecret"):
        template(DEFAULT, sets=["sasl.enabled=true"])
    with pytest.raises(HelmError, match=r"either bridge\.pipeline .* or pipelineSpec"):
        template(NO_PERSISTENCE, sets=["bridge.pipeline=tests.pipelines:tag"])


# --- what gets rendered ------------------------------------------------------------------------


def bridge_pod(resources: list[Manifest]) -> dict[str, Any]:
    return one(resources, "StatefulSet")["spec"]["template"]


def bridge_container(resources: list[Manifest]) -> dict[str, Any]:
    containers = bridge_pod(resources)["spec"]["containers"]
    return next(c for c in containers if c["name"] == "bridge")


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}


def test_persistence_on_gives_each_instance_a_claim(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(DEFAULT)
    sts = one(resources, "StatefulSet")
    claims = sts["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["state"]
    assert claims[0]["spec"]["resources"]["requests"]["storage"] == "10Gi"
    pod_volumes = {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert "state" not in pod_volumes  # the claim template provides it
    mounts = {m["name"]: m["mountPath"] for m in bridge_container(resources)["volumeMounts"]}
    assert mounts["state"] == STATE_DIR
    assert env_of(bridge_container(resources))["BRIDGE_STATE_DIR"]["value"] == STATE_DIR


def test_persistence_off_uses_an_empty_dir(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(NO_PERSISTENCE)
    sts = one(resources, "StatefulSet")
    assert "volumeClaimTemplates" not in sts["spec"]
    assert "persistentVolumeClaimRetentionPolicy" not in sts["spec"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert "emptyDir" in volumes["state"]
    mounts = {m["name"]: m["mountPath"] for m in bridge_container(resources)["volumeMounts"]}
    assert mounts["state"] == STATE_DIR


def test_instance_id_comes_from_the_pod_name(manifests: Callable[..., list[Manifest]]) -> None:
    env = env_of(bridge_container(manifests(DEFAULT)))
    assert env["BRIDGE_INSTANCE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # The ids must not depend on anything that changes between upgrades.
    assert env["BRIDGE_GROUP_ID"]["value"] == "streaming.demo-eos-bridge"
    assert env["BRIDGE_TRANSACTIONAL_ID_PREFIX"]["value"] == ""  # the bridge's rule: the group


@pytest.mark.parametrize("values", [DEFAULT, TWO_CLUSTERS], ids=ci_id)
@pytest.mark.parametrize(
    "sets", [[], ["bridge.groupId=orders-g"], ["bridge.transactionalIdPrefix=t"]], ids=str
)
def test_transactional_ids_follow_the_bridges_rule(
    helm: str, manifests: Callable[..., list[Manifest]], tmp_path: Path, values: Path,
    sets: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The rendered environment gives the transactional ids the bridge gives the values as the
    user set them (an unset prefix: the group, whatever it is), and NOTES names them."""
    for var in [v for v in os.environ if v.startswith("BRIDGE_")]:
        monkeypatch.delenv(var)
    env = env_of(bridge_container(manifests(values, sets=sets)))
    group = env["BRIDGE_GROUP_ID"]["value"]
    rendered = env["BRIDGE_TRANSACTIONAL_ID_PREFIX"]["value"]
    user = dict(pair.split("=", 1) for pair in sets).get("bridge.transactionalIdPrefix")
    base = {"input_topics": ["in"], "output_topic": "out", "instance_id": "demo-eos-bridge-0"}
    chart = load_settings(**base, group_id=group, transactional_id_prefix=rendered)
    bridge = load_settings(**base, group_id=group, transactional_id_prefix=user)
    notes = render_notes(helm, tmp_path, values, sets)
    if values == TWO_CLUSTERS:  # one producer per input partition (task)
        assert task_id_prefix(rendered, group) == task_id_prefix(user, group)
        assert f"transactional.id {task_id_prefix(user, group)}-task-<n>," in notes
    else:
        assert chart.transactional_id == bridge.transactional_id
        assert f"transactional.id {bridge.transactional_id_prefix or group}-<pod name>," in notes


def test_bridge_settings_reach_the_environment(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(NO_PERSISTENCE)
    env = env_of(bridge_container(resources))
    assert json.loads(env["BRIDGE_INPUT_TOPICS"]["value"]) == ["orders", "refunds"]
    assert env["BRIDGE_OUTPUT_TOPIC"]["value"] == "orders-out"
    assert env["BRIDGE_DLQ_TOPIC"]["value"] == "orders-dlq"
    assert env["BRIDGE_COMMIT_INTERVAL"]["value"] == "0.5"
    assert env["BRIDGE_COMMIT_EVERY"]["value"] == "5000"
    assert env["BRIDGE_PROCESSING_GUARANTEE"]["value"] == "exactly-once"
    assert env["BRIDGE_LOG_FORMAT"]["value"] == "text"
    assert env["BRIDGE_PIPELINE_SPEC"]["value"] == "/etc/eos-bridge/pipeline.yaml"

    config_map = one(resources, "ConfigMap", "demo-eos-bridge")
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config == {
        "kafka": {"client.rack": "zone-a"},
        "consumer": {"fetch.max.bytes": 52428800},
        "producer": {"linger.ms": 20, "compression.type": "lz4"},
    }
    assert env["BRIDGE_CONFIG_FILE"]["value"] == "/etc/eos-bridge/config.yaml"
    spec = yaml.safe_load(config_map["data"]["pipeline.yaml"])
    assert spec["steps"][1] == {"key_by": "customer_id"}


def test_group_protocol_reaches_the_environment(
    manifests: Callable[..., list[Manifest]],
) -> None:
    """bridge.groupProtocol is BRIDGE_GROUP_PROTOCOL; the default is consumer (KIP-848)."""
    default = env_of(bridge_container(manifests(DEFAULT)))
    assert default["BRIDGE_GROUP_PROTOCOL"]["value"] == "consumer"
    resources = manifests(DEFAULT, sets=["bridge.groupProtocol=classic"])
    assert env_of(bridge_container(resources))["BRIDGE_GROUP_PROTOCOL"]["value"] == "classic"


@pytest.mark.parametrize("values", CI_VALUES, ids=ci_id)
def test_the_bridge_accepts_the_rendered_configuration(
    manifests: Callable[..., list[Manifest]], values: Path, tmp_path: Path
) -> None:
    """`eos-bridge check-config` with the pod's environment and the ConfigMap's files."""
    resources = manifests(values)
    config_map = one(resources, "ConfigMap", "demo-eos-bridge")
    for name, text in config_map["data"].items():
        (tmp_path / name).write_text(text.replace("/etc/eos-bridge", str(tmp_path)))
    for tls in ("tls", "target-tls"):  # the mounted TLS Secrets' files
        (tmp_path / tls).mkdir()
        for name in ("ca.crt", "client.crt", "client.key"):
            (tmp_path / tls / name).write_text("-----BEGIN PLACEHOLDER-----\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    for var in bridge_container(resources)["env"]:
        if "value" in var:
            env[var["name"]] = var["value"].replace("/etc/eos-bridge", str(tmp_path))
        elif "fieldRef" in var["valueFrom"]:
            env[var["name"]] = "demo-eos-bridge-0"
        else:
            env[var["name"]] = "from-secret-" + var["valueFrom"]["secretKeyRef"]["key"]

    result = subprocess.run(
        [sys.executable, "-m", "app", "check-config"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "eos-bridge: group protocol: consumer (KIP-848" in result.stderr
    effective = json.loads(result.stdout)
    assert effective["transactional_id"] == "streaming.demo-eos-bridge-demo-eos-bridge-0"
    assert effective["state_dir"] == STATE_DIR
    assert "from-secret-password" not in result.stdout
    if "pipeline.yaml" in config_map["data"]:
        from app.pipeline.spec import load_spec

        assert load_spec(tmp_path / "pipeline.yaml") is not None


def test_large_numbers_are_not_rendered_in_exponent_form(
    manifests: Callable[..., list[Manifest]],
) -> None:
    env = env_of(bridge_container(manifests(DEFAULT, sets=["bridge.commitEvery=2000000"])))
    assert env["BRIDGE_COMMIT_EVERY"]["value"] == "2000000"


def checksum(resources: list[Manifest]) -> str:
    return bridge_pod(resources)["metadata"]["annotations"]["checksum/config"]


def test_config_change_changes_the_checksum(manifests: Callable[..., list[Manifest]]) -> None:
    base = checksum(manifests(DEFAULT))
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum(manifests(DEFAULT, sets=["bridge.producer.linger\\.ms=50"])) != base
    assert checksum(manifests(DEFAULT, sets=["pipelineSpec.steps[0].filter=true"])) != base
    # Settings outside the ConfigMap roll the pods through the pod template itself.
    assert checksum(manifests(DEFAULT, sets=["replicaCount=3"])) == base


def test_pods_are_hardened(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(DEFAULT)
    pod = bridge_pod(resources)["spec"]
    container = bridge_container(resources)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]  # the only writable path besides the state
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert pod["terminationGracePeriodSeconds"] >= 40  # shutdownTimeout 30 s + 10 s
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_probes_and_ports(manifests: Callable[..., list[Manifest]]) -> None:
    container = bridge_container(manifests(DEFAULT))
    assert container["ports"] == [{"name": "http", "containerPort": 9000, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/livez"
    assert container["args"] == ["supervise", "--", "run"]


def test_services_select_the_bridge_pods(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(SERVICEMONITOR)
    sts = one(resources, "StatefulSet")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    headless = one(resources, "Service", "demo-eos-bridge-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]
    metrics = one(resources, "Service", "demo-eos-bridge-metrics")
    for service in (headless, metrics):
        assert service["spec"]["selector"].items() <= pod_labels.items()

    monitor = one(resources, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    assert wanted <= metrics["metadata"]["labels"].items()
    assert not wanted <= headless["metadata"]["labels"].items()  # scraped once, not twice
    port_names = {p["name"] for p in metrics["spec"]["ports"]}
    assert monitor["spec"]["endpoints"][0]["port"] in port_names
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"

    pdb = one(resources, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1


def test_no_servicemonitor_unless_asked(manifests: Callable[..., list[Manifest]]) -> None:
    assert not [r for r in manifests(DEFAULT) if r["kind"] == "ServiceMonitor"]


def test_sasl_credentials_come_from_the_secret(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(SASL)
    env = env_of(bridge_container(resources))
    for name, key in (("BRIDGE_SASL_USERNAME", "username"), ("BRIDGE_SASL_PASSWORD", "password")):
        assert env[name]["valueFrom"]["secretKeyRef"] == {
            "name": "eos-bridge-kafka-credentials",
            "key": key,
        }
    config = yaml.safe_load(one(resources, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"])
    assert config["kafka"] == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "ssl.ca.location": "/etc/eos-bridge/tls/ca.crt",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert not [r for r in resources if r["kind"] == "Secret"]  # the chart never holds them
    image = bridge_container(resources)["image"]
    assert image == (
        "registry.example.com/eos-bridge@sha256:"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    )


def test_two_clusters_each_with_its_own_secrets(manifests: Callable[..., list[Manifest]]) -> None:
    resources = manifests(TWO_CLUSTERS)
    container = bridge_container(resources)
    env = env_of(container)
    assert env["BRIDGE_BOOTSTRAP_SERVERS"]["value"] == "kafka-0.onprem.example.com:9093"
    assert env["BRIDGE_TARGET__BOOTSTRAP_SERVERS"]["value"] == (
        "b-1.cloud.example.com:9096,b-2.cloud.example.com:9096"
    )
    assert env["BRIDGE_OFFSETS_TOPIC"]["value"] == "orders-bridge.offsets"
    assert env["BRIDGE_MIRROR_OFFSETS_TO_SOURCE"]["value"] == "true"
    for cluster, secret in (
        ("", "source-kafka-credentials"),
        ("TARGET__", "target-kafka-credentials"),
    ):
        for name, key in (("USERNAME", "username"), ("PASSWORD", "password")):
            ref = env[f"BRIDGE_{cluster}SASL_{name}"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": secret, "key": key}
    config = yaml.safe_load(one(resources, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"])
    assert config["kafka"]["ssl.ca.location"] == "/etc/eos-bridge/tls/ca.crt"
    assert config["target"] == {"kafka": {
        "client.id": "eos-bridge-target",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "ssl.ca.location": "/etc/eos-bridge/target-tls/ca.crt",
        "ssl.endpoint.identification.algorithm": "https",
    }}  # fmt: skip
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["target-kafka-tls"] == "/etc/eos-bridge/target-tls"
    volumes = {v["name"]: v for v in bridge_pod(resources)["spec"]["volumes"]}
    sources = volumes["target-kafka-tls"]["projected"]["sources"]
    assert [s["secret"]["name"] for s in sources] == ["target-kafka-ca"]
    policy = one(resources, "NetworkPolicy", "demo-eos-bridge")
    assert [p["port"] for p in policy["spec"]["egress"][0]["ports"]] == [9093, 9096]
    assert not [r for r in resources if r["kind"] == "Secret"]  # the chart never holds them
    one_cluster = env_of(bridge_container(manifests(SASL)))
    assert not [name for name in one_cluster if "TARGET" in name or "OFFSETS" in name]


def test_the_targets_secrets_are_required_and_stay_out_of_the_config_map(
    template: Callable[..., str],
) -> None:
    with pytest.raises(HelmError, match=r"target\.sasl\.existingSecret must name a Secret"):
        template(TWO_CLUSTERS, sets=["target.sasl.existingSecret="])
    with pytest.raises(HelmError, match=r"target\.kafka\.sasl\.password would put a secret"):
        template(TWO_CLUSTERS, sets=["target.kafka.sasl\\.password=x"])


def test_registry_url_and_ca_in_the_config_file_basic_auth_from_the_secret(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(REGISTRY)
    config = yaml.safe_load(one(resources, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"])
    assert config["schema_registry"] == {
        "url": "https://registry.example.com:8081",
        "ca_location": "/etc/eos-bridge/registry-tls/ca.crt",
    }
    container = bridge_container(resources)
    env = env_of(container)
    assert env["BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH"]["valueFrom"]["secretKeyRef"] == {
        "name": "registry-credentials",
        "key": "basic-auth",
    }
    mount = next(m for m in container["volumeMounts"] if m["name"] == "registry-tls")
    assert mount == {"name": "registry-tls", "mountPath": "/etc/eos-bridge/registry-tls",
                     "readOnly": True}  # fmt: skip
    volume = next(
        v for v in bridge_pod(resources)["spec"]["volumes"] if v["name"] == "registry-tls"
    )
    assert volume["secret"]["secretName"] == "registry-ca"
    assert not [r for r in resources if r["kind"] == "Secret"]  # the chart never holds them
    default = yaml.safe_load(
        one(manifests(DEFAULT), "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"]
    )
    assert "schema_registry" not in default


def test_spark_job_is_optional_and_runs_available_now(
    manifests: Callable[..., list[Manifest]],
) -> None:
    assert not [r for r in manifests(DEFAULT) if r["kind"] == "CronJob"]

    resources = manifests(SPARK)
    cron = one(resources, "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "eos-bridge-spark:0.1.0"
    assert container["command"] == ["python", "-m", "spark_jobs.stream"]
    args = container["args"]
    assert args[:2] == ["--trigger", "available-now"]
    assert args[args.index("--topic") + 1] == "clicks-clean"  # templated from bridge.outputTopic
    assert args[args.index("--bootstrap") + 1] == "kafka:9092"
    # The job's own parser accepts exactly what the CronJob passes.
    from spark_jobs.stream import parse_args

    parsed = parse_args(args)
    assert parsed.trigger == "available-now"
    assert parsed.checkpoint.startswith("/var/lib/eos-bridge/spark/")
    assert parsed.table.startswith("/var/lib/eos-bridge/spark/")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    claim = one(resources, "PersistentVolumeClaim")
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


@pytest.mark.parametrize(
    ("sets", "image"),
    [
        ([], "eos-bridge-spark:0.1.0"),
        (["image.repository=ghcr.io/acme/eos-bridge"], "ghcr.io/acme/eos-bridge-spark:0.1.0"),
        (
            ["image.repository=ghcr.io/acme/eos-bridge", "image.tag=0.2.0"],
            "ghcr.io/acme/eos-bridge-spark:0.2.0",
        ),
        (  # the bridge image's digest names the bridge image only
            ["image.repository=r.example/eos-bridge", f"image.digest=sha256:{'a' * 64}"],
            "r.example/eos-bridge-spark:0.1.0",
        ),
        (
            [
                "image.repository=ghcr.io/acme/eos-bridge",
                "spark.image.repository=mirror.example/spark",
                "spark.image.tag=s1",
                "sparkApplication.image.repository=mirror.example/spark",
                "sparkApplication.image.tag=s1",
            ],
            "mirror.example/spark:s1",
        ),
    ],
)
def test_spark_image_follows_the_bridge_image_unless_set(
    manifests: Callable[..., list[Manifest]], sets: list[str], image: str
) -> None:
    """An unset Spark image sits next to the bridge's (same registry, `-spark`, same tag), for
    the CronJob and the SparkApplication alike."""
    app = [*sets, "sparkApplication.enabled=true", "sparkApplication.storage.claimName=rwx"]
    cron = one(manifests(SPARK, sets=sets), "CronJob")
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == image
    assert one(manifests(DEFAULT, sets=app), "SparkApplication")["spec"]["image"] == image


def test_image_and_chart_agree() -> None:
    """The chart's uid, port and command match what the Dockerfile builds."""
    dockerfile = (REPO / "Dockerfile").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert re.search(r"^USER 10001:10001$", dockerfile, re.M)
    assert values["podSecurityContext"]["runAsUser"] == 10001
    assert f"EXPOSE {values['bridge']['httpPort']}" in dockerfile
    assert 'ENTRYPOINT ["eos-bridge"]' in dockerfile
    assert f"BRIDGE_STATE_DIR={STATE_DIR}" in dockerfile


def render_notes(helm: str, tmp_path: Path, values: Path, sets: list[str]) -> str:
    """NOTES.txt rendered, whitespace collapsed (helm template skips it, and install --dry-run
    wants a cluster)."""
    chart = tmp_path / "eos-bridge"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "NOTES.txt").rename(chart / "notes.txt")
    (chart / "templates" / "notes.yaml").write_text(
        'notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n'
    )
    args = ["template", "demo", str(chart), "--namespace", NAMESPACE, "--values", str(values)]
    for pair in sets:
        args += ["--set", pair]
    out = run_helm(helm, [*args, "--show-only", "templates/notes.yaml"])
    return " ".join(yaml.safe_load(out)["notes"].split())


def test_notes_render(helm: str, tmp_path: Path) -> None:
    notes = render_notes(helm, tmp_path, SPARK, [])
    assert "clicks -> clicks-clean" in notes
    assert "statefulset/demo-eos-bridge" in notes
    assert "cronjob/demo-eos-bridge-spark" in notes
    assert "helm test demo -n streaming" in notes
    assert "WARNING" not in notes  # persistence is on
