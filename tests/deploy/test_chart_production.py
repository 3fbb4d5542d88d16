"""What a production namespace needs from the chart: refusals, unique ids, spreading, shutdown,
network policies, TLS/SASL from Secrets, the `helm test` pod and bounded Spark scratch space."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_settings
from app.errors import ConfigError
from app.kafka.defaults import FORCED_CONSUMER_KEYS, FORCED_PRODUCER_KEYS, FORCED_REASONS

from .helpers import CHART, NAMESPACE, REPO, HelmError, Manifest, one

pytestmark = pytest.mark.chart

DEFAULT = CHART / "ci" / "default-values.yaml"
MTLS = CHART / "ci" / "mtls-values.yaml"
SASL = CHART / "ci" / "sasl-values.yaml"
SPARK = CHART / "ci" / "spark-values.yaml"


def pod_spec(resource: Manifest) -> dict[str, Any]:
    if resource["kind"] == "Pod":
        return resource["spec"]
    if resource["kind"] == "CronJob":
        return resource["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return resource["spec"]["template"]["spec"]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}


def bridge_spec(resources: list[Manifest]) -> dict[str, Any]:
    return pod_spec(one(resources, "StatefulSet"))


# --- values the bridge would refuse are refused when rendering ---------------------------------


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ("podDisruptionBudget.maxUnavailable=0", "maxUnavailable"),
        ("podDisruptionBudget.maxUnavailable=0%", "maxUnavailable"),
        ("bridge.transactionTimeoutMs=999999999", "transactionTimeoutMs"),
        ("podAntiAffinity=sometimes", "podAntiAffinity"),
    ],
)
def test_schema_refuses(template: Callable[..., str], bad: str, named: str) -> None:
    with pytest.raises(HelmError) as failure:
        template(DEFAULT, sets=[bad])
    assert "values don't meet the specifications of the schema" in str(failure.value)
    assert named in str(failure.value)


def test_forced_keys_are_refused_with_the_bridges_reason(template: Callable[..., str]) -> None:
    """Every key app/kafka/defaults.py forces is refused in each librdkafka map the bridge
    refuses it in, naming the map, the key and why (the bridge's reason, or the chart value it
    comes from); a key the bridge leaves to the user renders."""
    sections = {
        "bridge.kafka": FORCED_CONSUMER_KEYS | FORCED_PRODUCER_KEYS,
        "bridge.consumer": FORCED_CONSUMER_KEYS,
        "bridge.producer": FORCED_PRODUCER_KEYS,
        "target.kafka": FORCED_CONSUMER_KEYS | FORCED_PRODUCER_KEYS,
    }

    def setting(section: str, key: str) -> str:
        return section + "." + key.replace(".", "\\.") + "=x"  # --set: the key's dots escaped

    for section, forced in sections.items():
        for key in sorted(forced):
            with pytest.raises(HelmError) as failure:
                template(DEFAULT, sets=[setting(section, key)])
            reason = FORCED_REASONS[key]
            said = reason if not reason.startswith("from ") else "from "
            assert f"{section}.{key} is set by the bridge itself ({said}" in str(failure.value)
            assert "): remove it" in str(failure.value)
        allowed = sorted((FORCED_CONSUMER_KEYS | FORCED_PRODUCER_KEYS) - forced) or ["linger.ms"]
        template(DEFAULT, sets=[setting(section, allowed[0])])


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["bridge.commitInterval=21"], r"bridge\.commitInterval \(21s\) must be at most a third"),
        (["bridge.outputTopic=orders"], r"bridge\.outputTopic \"orders\" is also in"),
        (["bridge.kafka.sasl\\.password=x"], r"bridge\.kafka\.sasl\.password would put a secret"),
        (["bridge.producer.ssl\\.key\\.password=x"], r"ssl\.key\.password would put a secret"),
        (["terminationGracePeriodSeconds=39"], r"shorter than the bridge's worst-case shutdown"),
        (
            ["tls.enabled=true", "bridge.kafka.ssl\\.endpoint\\.identification\\.algorithm=none"],
            r"set by the chart from the sasl and tls values",
        ),
        (
            [
                "tls.enabled=true",
                "sasl.enabled=true",
                "sasl.existingSecret=s",
                "sasl.securityProtocol=SASL_PLAINTEXT",
            ],
            r"tls\.enabled needs sasl\.securityProtocol SASL_SSL",
        ),
        (["tls.enabled=true", "tls.keyPasswordSecret.name=p"], r"set tls\.clientSecret too"),
    ],
)
def test_rendering_refuses(template: Callable[..., str], sets: list[str], message: str) -> None:
    with pytest.raises(HelmError, match=message):
        template(DEFAULT, sets=sets)


def test_the_bridge_refuses_what_the_chart_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two cross-field rules mirror app/config.py: same inputs, the bridge says no too."""
    for var in [v for v in os.environ if v.startswith("BRIDGE_")]:
        monkeypatch.delenv(var)
    base = {"input_topics": ["orders"], "output_topic": "out", "transaction_timeout_ms": 60000}
    assert load_settings(**{**base, "commit_interval": 20})
    with pytest.raises(ConfigError, match="commit_interval"):
        load_settings(**{**base, "commit_interval": 21})
    with pytest.raises(ConfigError, match="also an input topic"):
        load_settings(**{**base, "output_topic": "orders"})


# --- unique ids, spreading, shutdown -----------------------------------------------------------


def test_default_ids_are_unique_per_namespace_and_release(helm: str) -> None:
    def ids(release: str, namespace: str, *sets: str) -> tuple[str, str]:
        args = [helm, "template", release, str(CHART), "-n", namespace, "-f", str(DEFAULT)]
        for pair in sets:
            args += ["--set", pair]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        docs = [d for d in yaml.safe_load_all(out) if d]
        env = env_of(bridge_spec(docs)["containers"][0])
        group = env["BRIDGE_GROUP_ID"]["value"]  # an unset prefix is the group (the bridge's rule)
        return group, env["BRIDGE_TRANSACTIONAL_ID_PREFIX"]["value"] or group

    assert ids("orders", "team-a") == ("team-a.orders-eos-bridge",) * 2
    assert ids("orders", "team-b") == ("team-b.orders-eos-bridge",) * 2
    assert ids("refunds", "team-a")[0] != ids("orders", "team-a")[0]
    assert ids("orders", "team-a", "bridge.groupId=g", "bridge.transactionalIdPrefix=t") == (
        "g",
        "t",
    )


def test_instances_spread_over_nodes_and_zones_by_default(
    manifests: Callable[..., list[Manifest]],
) -> None:
    spec = bridge_spec(manifests(DEFAULT))
    labels = one(manifests(DEFAULT), "StatefulSet")["spec"]["selector"]["matchLabels"]
    preferred = spec["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert preferred[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == labels
    [spread] = spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"  # soft: never blocks scheduling
    assert spread["labelSelector"]["matchLabels"] == labels

    hard = bridge_spec(manifests(MTLS))["affinity"]["podAntiAffinity"]
    assert list(hard) == ["requiredDuringSchedulingIgnoredDuringExecution"]
    assert "affinity" not in bridge_spec(manifests(DEFAULT, sets=["podAntiAffinity=none"]))
    own = bridge_spec(manifests(DEFAULT, sets=["affinity.nodeAffinity.x=y"]))["affinity"]
    assert own == {"nodeAffinity": {"x": "y"}}


@pytest.mark.parametrize(
    ("sets", "grace"),
    [
        ([], 40),  # shutdownTimeout 30 s + 10 s
        (["bridge.transactionTimeoutMs=120000", "bridge.shutdownTimeout=60"], 70),
        (["bridge.shutdownTimeout=3"], 13),
        (["terminationGracePeriodSeconds=300"], 300),
    ],
)
def test_grace_period_covers_the_bridges_shutdown(
    manifests: Callable[..., list[Manifest]], sets: list[str], grace: int
) -> None:
    resources = manifests(DEFAULT, sets=sets)
    spec = bridge_spec(resources)
    env = env_of(spec["containers"][0])
    bound = float(env["BRIDGE_SHUTDOWN_TIMEOUT"]["value"]) + 10
    assert spec["terminationGracePeriodSeconds"] == grace >= bound


# --- network policies --------------------------------------------------------------------------


def test_network_policies_are_off_by_default(manifests: Callable[..., list[Manifest]]) -> None:
    assert not [r for r in manifests(SASL) if r["kind"] == "NetworkPolicy"]


def test_network_policies_allow_kafka_dns_and_metrics_only(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(MTLS)
    policies = {r["metadata"]["name"]: r["spec"] for r in resources if r["kind"] == "NetworkPolicy"}
    assert set(policies) == {"demo-eos-bridge", "demo-eos-bridge-test"}
    bridge = policies["demo-eos-bridge"]
    pod_labels = one(resources, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert bridge["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert bridge["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = bridge["ingress"]
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert ingress["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    kafka, dns, api = bridge["egress"]  # api: the StatefulSet's replicas (scale-in leave)
    assert api == {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert kafka["ports"] == [{"port": 9094, "protocol": "TCP"}]  # from bootstrapServers
    assert kafka["to"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "infra"
    }
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}

    with_spark = manifests(
        MTLS, sets=["spark.enabled=true", "networkPolicy.kafkaPorts={9092,9094}"]
    )
    spark = one(with_spark, "NetworkPolicy", "demo-eos-bridge-spark")["spec"]
    assert spark["ingress"] == []
    assert [p["port"] for p in spark["egress"][0]["ports"]] == [9092, 9094]
    job = one(with_spark, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
    assert spark["podSelector"]["matchLabels"].items() <= job["labels"].items()


def test_scale_in_reads_only_its_own_statefulset_with_its_own_token(
    manifests: Callable[..., list[Manifest]],
) -> None:
    """bridge.leaveGroupOnShutdown=scale-in (the default): a Role with get on this one
    StatefulSet, bound to the pods' ServiceAccount, and a token mounted in the bridge container
    only (the pod-wide automount stays off); never/always: no Role, no token, no API egress."""
    resources = manifests(MTLS)
    statefulset = one(resources, "StatefulSet")
    name = statefulset["metadata"]["name"]
    role = one(resources, "Role")
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "resourceNames": [name],
         "verbs": ["get"]}
    ]  # fmt: skip
    binding = one(resources, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]
    }  # fmt: skip
    pod = bridge_spec(resources)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}
    ]
    assert pod["automountServiceAccountToken"] is False
    [container] = [c for c in pod["containers"] if c["name"] == "bridge"]
    assert env_of(container)["BRIDGE_LEAVE_GROUP_ON_SHUTDOWN"]["value"] == "scale-in"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    token = mounts["kube-api-access"]
    assert token["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert token["readOnly"] is True
    sources = {v["name"]: v for v in pod["volumes"]}["kube-api-access"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"

    for mode in ("never", "always"):
        other = manifests(MTLS, sets=[f"bridge.leaveGroupOnShutdown={mode}"])
        assert not [r for r in other if r["kind"] in ("Role", "RoleBinding")]
        spec = bridge_spec(other)
        assert "kube-api-access" not in {v["name"] for v in spec["volumes"]}
        policy = one(other, "NetworkPolicy", "demo-eos-bridge")["spec"]
        assert len(policy["egress"]) == 2  # Kafka and DNS only


# --- TLS and SASL from Secrets only ------------------------------------------------------------


def no_secret_values(resources: list[Manifest]) -> None:
    assert not [r for r in resources if r["kind"] == "Secret"]
    for config_map in (r for r in resources if r["kind"] == "ConfigMap"):
        for text in config_map["data"].values():
            assert "password" not in text and "jaas" not in text, config_map["metadata"]["name"]


def test_mutual_tls_files_and_key_password_come_from_secrets(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(MTLS)
    no_secret_values(resources)
    spec = bridge_spec(resources)
    volume = next(v for v in spec["volumes"] if v["name"] == "kafka-tls")
    sources = {s["secret"]["name"]: s["secret"]["items"] for s in volume["projected"]["sources"]}
    assert sources == {
        "kafka-ca": [{"key": "ca.pem", "path": "ca.crt"}],
        "eos-bridge-client-tls": [
            {"key": "tls.crt", "path": "client.crt"},
            {"key": "tls.key", "path": "client.key"},
        ],
    }
    config = yaml.safe_load(one(resources, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"])[
        "kafka"
    ]
    assert config == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/eos-bridge/tls/ca.crt",
        "ssl.certificate.location": "/etc/eos-bridge/tls/client.crt",
        "ssl.key.location": "/etc/eos-bridge/tls/client.key",
        "ssl.endpoint.identification.algorithm": "https",
    }
    test_pod = one(resources, "Pod")
    for container in [*spec["containers"], *pod_spec(test_pod)["containers"]]:
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["kafka-tls"] == {
            "name": "kafka-tls",
            "mountPath": "/etc/eos-bridge/tls",
            "readOnly": True,
        }
        password = env_of(container)["BRIDGE_KAFKA__ssl.key.password"]
        assert password["valueFrom"]["secretKeyRef"] == {
            "name": "eos-bridge-client-key-password",
            "key": "password",
        }
    off = manifests(MTLS, sets=["tls.verifyHostname=false"])
    text = one(off, "ConfigMap", "demo-eos-bridge")["data"]["config.yaml"]
    assert yaml.safe_load(text)["kafka"]["ssl.endpoint.identification.algorithm"] == "none"


def test_spark_job_gets_the_same_credentials_from_secrets(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(SASL)
    no_secret_values(resources)
    job = pod_spec(one(resources, "CronJob"))
    container = job["containers"][0]
    env = env_of(container)
    for name, key in (("BRIDGE_SASL_USERNAME", "username"), ("BRIDGE_SASL_PASSWORD", "password")):
        assert env[name]["valueFrom"]["secretKeyRef"] == {
            "name": "eos-bridge-kafka-credentials",
            "key": key,
        }
    assert env["BRIDGE_CONFIG_FILE"]["value"] == "/etc/eos-bridge/config.yaml"
    assert not any("password" in a or "jaas" in a for a in container["args"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["kafka-tls"] == "/etc/eos-bridge/tls"
    assert mounts["config"] == "/etc/eos-bridge"
    volumes = {v["name"]: v for v in job["volumes"]}
    assert volumes["kafka-tls"] == next(
        v for v in bridge_spec(resources)["volumes"] if v["name"] == "kafka-tls"
    )


# --- helm test ---------------------------------------------------------------------------------


def test_helm_test_pod_checks_config_then_connectivity(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(SASL)
    pod = one(resources, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    config_map = one(resources, "ConfigMap", "demo-eos-bridge-test")
    assert config_map["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod_spec(pod)
    assert spec["restartPolicy"] == "Never"
    [init] = spec["initContainers"]
    [main] = spec["containers"]
    bridge = bridge_spec(resources)["containers"][0]
    assert init["args"] == ["check-config"]
    assert init["image"] == main["image"] == bridge["image"]
    assert main["command"][:2] == ["python", "/etc/eos-bridge-test/check_connectivity.py"]
    assert init["env"] == main["env"] == bridge["env"]  # checks what the bridge runs with
    script = (CHART / "files" / "check_connectivity.py").read_text()
    assert config_map["data"]["check_connectivity.py"].strip() == script.strip()
    assert not [r for r in manifests(SASL, sets=["tests.enabled=false"]) if r["kind"] == "Pod"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def run_check(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    return subprocess.run(
        [sys.executable, str(CHART / "files" / "check_connectivity.py"), "--timeout", "2"],
        env={**base, "PYTHONPATH": str(REPO), **env}, cwd=tmp_path,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_connectivity_check_says_why_it_fails(tmp_path: Path) -> None:
    env = {
        "BRIDGE_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",  # nothing listens there
        "BRIDGE_INPUT_TOPICS": "orders",
        "BRIDGE_OUTPUT_TOPIC": "orders-out",
    }
    unreachable = run_check(env, tmp_path)
    assert unreachable.returncode == 1
    assert unreachable.stderr.count("\n") == 1
    assert "no answer from Kafka at 127.0.0.1:" in unreachable.stderr

    invalid = run_check({**env, "BRIDGE_OUTPUT_TOPIC": "orders"}, tmp_path)
    assert invalid.returncode == 2
    assert "also an input topic" in invalid.stderr


# --- Spark scratch space -----------------------------------------------------------------------

UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str) -> int:
    for suffix, factor in UNITS.items():
        if text.endswith(suffix):
            return int(float(text.removesuffix(suffix)) * factor)
    return int(text)


def test_spark_scratch_space_is_bounded(manifests: Callable[..., list[Manifest]]) -> None:
    job = pod_spec(one(manifests(SPARK), "CronJob"))
    container = job["containers"][0]
    volumes = {v["name"]: v for v in job["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    scratch = volumes[mounts["/tmp"]]["emptyDir"]["sizeLimit"]
    assert env_of(container)["SPARK_LOCAL_DIRS"]["value"] == "/tmp"
    resources = container["resources"]
    request = quantity(resources["requests"]["ephemeral-storage"])
    limit = quantity(resources["limits"]["ephemeral-storage"])
    assert quantity(scratch) <= request <= limit
    bridge = bridge_spec(manifests(DEFAULT))["containers"][0]["resources"]
    assert bridge["requests"]["ephemeral-storage"] and bridge["limits"]["ephemeral-storage"]
