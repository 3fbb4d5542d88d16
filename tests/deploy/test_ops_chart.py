"""The chart's operations kit: the Grafana dashboard ConfigMap and the PrometheusRule.

The alert rules are rendered from the chart and run through Prometheus' own `promtool test
rules` (pinned, built from the Go module proxy by tools/promtool.sh) against
tests/deploy/rules-test.yaml, which makes each alert fire on one set of series and stay
silent on its look-alikes. tests/integration/test_ops_kit.py checks the metric names against
a live bridge.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.promql import dashboard_exprs, keda_queries, yaml_blocks

from .helpers import CHART, REPO, Manifest, one, run_helm, tool_path
from .test_chart import bridge_container, env_of

pytestmark = pytest.mark.chart

DEFAULT = CHART / "ci" / "default-values.yaml"
OBSERVABILITY = CHART / "ci" / "observability-values.yaml"
RULES_TEST = Path(__file__).with_name("rules-test.yaml")


@pytest.fixture(scope="module")
def promtool() -> str:
    return tool_path("promtool.sh")


def rule_groups(manifests: Callable[..., list[Manifest]], sets: Sequence[str] = ()) -> Any:
    rule = one(manifests(DEFAULT, sets=["prometheusRule.enabled=true", *sets]), "PrometheusRule")
    return rule["spec"]


def run_promtool(promtool: str, workdir: Path, spec: Any) -> subprocess.CompletedProcess[str]:
    """`promtool check rules` then `promtool test rules` on ``spec`` as rules.yaml."""
    (workdir / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(RULES_TEST, workdir / RULES_TEST.name)
    checked = subprocess.run(
        [promtool, "check", "rules", "rules.yaml"],
        cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if checked.returncode != 0:
        return checked
    return subprocess.run(
        [promtool, "test", "rules", RULES_TEST.name],
        cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_alert_rules_pass_promtool(
    promtool: str, manifests: Callable[..., list[Manifest]], tmp_path: Path
) -> None:
    result = run_promtool(promtool, tmp_path, rule_groups(manifests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_a_changed_threshold_fails_the_rule_tests(
    promtool: str, manifests: Callable[..., list[Manifest]], tmp_path: Path
) -> None:
    """The rule tests can fail: above 100,000 records the growing 8,000-record lag is silent."""
    spec = rule_groups(manifests, sets=["prometheusRule.lagGrowing.minRecords=100000"])
    result = run_promtool(promtool, tmp_path, spec)
    assert result.returncode != 0
    assert "EosBridgeConsumerLagGrowing" in result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_silent(manifests: Callable[..., list[Manifest]]) -> None:
    alerts = {r["alert"] for g in rule_groups(manifests)["groups"] for r in g["rules"]}
    cases = [
        case for test in yaml.safe_load(RULES_TEST.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]  # fmt: skip
    fires = {c["alertname"] for c in cases if c["exp_alerts"]}
    silent = {c["alertname"] for c in cases if not c["exp_alerts"]}
    assert alerts == {
        "EosBridgeNoCheckpoint", "EosBridgeDeadLetterRatioHigh", "EosBridgeConsumerLagGrowing",
        "EosBridgeNotReady", "EosBridgeRecoveryStuck", "EosBridgeRestarting",
        "EosBridgeAbortsWithoutCommits", "EosBridgeHangingTransaction",
        "EosBridgePartitionStalled",
    }  # fmt: skip
    assert fires == alerts and silent == alerts


def test_no_checkpoint_window_is_commit_intervals_times_the_interval(
    manifests: Callable[..., list[Manifest]],
) -> None:
    spec = rule_groups(manifests, sets=["bridge.commitInterval=3"])
    rule = next(r for r in spec["groups"][0]["rules"] if r["alert"] == "EosBridgeNoCheckpoint")
    assert "> 90)" in rule["expr"]  # 30 intervals of 3 s


def test_partition_stalled_threshold_is_commit_intervals_but_at_least_min_seconds(
    manifests: Callable[..., list[Manifest]],
) -> None:
    def threshold(*sets: str) -> str:
        spec = rule_groups(manifests, sets=list(sets))
        rules = spec["groups"][0]["rules"]
        rule = next(r for r in rules if r["alert"] == "EosBridgePartitionStalled")
        return rule["expr"].splitlines()[0].rsplit("> ", 1)[1]

    assert threshold() == "120"  # 5 intervals of 1 s are less than minSeconds
    longer = ["bridge.commitInterval=15", "prometheusRule.partitionStalled.commitIntervals=10"]
    assert threshold(*longer) == "150"  # 10 intervals of 15 s


def exprs(spec: Any) -> str:
    return "\n".join(r["expr"] for g in spec["groups"] for r in g["rules"])


def test_rules_select_this_release_unless_told_otherwise(
    manifests: Callable[..., list[Manifest]],
) -> None:
    default = exprs(rule_groups(manifests))
    assert 'eos_bridge_ready{namespace="streaming", job="demo-eos-bridge-metrics"}' in default
    chosen = exprs(rule_groups(manifests, sets=['prometheusRule.selector=job="orders"']))
    assert 'eos_bridge_ready{job="orders"}' in chosen and "demo-eos-bridge" not in chosen


def test_dashboard_and_rules_are_off_by_default(manifests: Callable[..., list[Manifest]]) -> None:
    kinds = [(r["kind"], r["metadata"]["name"]) for r in manifests(DEFAULT)]
    assert ("PrometheusRule", "demo-eos-bridge") not in kinds
    assert ("ConfigMap", "demo-eos-bridge-dashboard") not in kinds


def test_dashboard_configmap_carries_the_sidecar_label_and_valid_json(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(OBSERVABILITY)
    configmap = one(resources, "ConfigMap", "demo-eos-bridge-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Kafka"}
    dashboard = json.loads(configmap["data"]["eos-bridge.json"])
    graphs = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(graphs) >= 10
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in graphs)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    assert len(dashboard_exprs(CHART / "files" / "dashboard.json")) == sum(
        len(p["targets"]) for p in graphs
    )
    one(resources, "PrometheusRule", "demo-eos-bridge")


def test_keda_example_scales_the_charts_statefulset_on_its_lag_metric(helm: str) -> None:
    """docs/operations.md's ScaledObject names what the chart renders for release orders."""
    doc = REPO / "docs" / "operations.md"
    rendered = run_helm(
        helm, ["template", "orders", str(CHART), "--namespace", "streaming", "--values",
               str(DEFAULT)],
    )  # fmt: skip
    resources = [r for r in yaml.safe_load_all(rendered) if r]
    statefulset = one(resources, "StatefulSet")
    scaled = next(b for b in yaml_blocks(doc) if b.get("kind") == "ScaledObject")
    target = scaled["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("StatefulSet", statefulset["metadata"]["name"])
    service = one(resources, "Service", "orders-eos-bridge-metrics")
    (query,) = keda_queries(doc)
    assert f'job="{service["metadata"]["name"]}"' in query and 'namespace="streaming"' in query
    kafka_trigger = next(b for b in yaml_blocks(doc) if "spec" not in b and "triggers" in b)
    group = kafka_trigger["triggers"][0]["metadata"]["consumerGroup"]
    assert env_of(bridge_container(resources))["BRIDGE_GROUP_ID"]["value"] == group
