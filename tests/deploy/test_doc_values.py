"""The values file of docs/deploy.md's `helm install` renders, validates and reaches the pods.

The doc test cannot run `helm install` (no cluster here); this renders the very file it names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import REPO, Manifest
from .test_chart import KUBE_VERSIONS, bridge_container, env_of, kubernetes_validate, one

pytestmark = pytest.mark.chart

DOC_VALUES = REPO / "examples" / "helm" / "orders-values.yaml"


def test_deploy_doc_names_this_values_file() -> None:
    assert "--values examples/helm/orders-values.yaml" in (REPO / "docs" / "deploy.md").read_text()


def test_the_values_file_renders_both_brokers(
    manifests: Callable[..., list[Manifest]],
) -> None:
    resources = manifests(DOC_VALUES)
    env = env_of(bridge_container(resources))
    assert env["BRIDGE_BOOTSTRAP_SERVERS"]["value"] == "kafka-0.kafka:9092,kafka-1.kafka:9092"
    assert one(resources, "StatefulSet")["spec"]["replicas"] == 3


def test_the_escaped_set_form_in_the_doc_renders_the_same(
    manifests: Callable[..., list[Manifest]],
) -> None:
    escaped = "bridge.bootstrapServers=kafka-0.kafka:9092\\,kafka-1.kafka:9092"
    assert escaped in (REPO / "docs" / "deploy.md").read_text()
    sets = [escaped, "bridge.inputTopics={orders}", "bridge.outputTopic=orders-enriched"]
    env = env_of(bridge_container(manifests(sets=sets)))
    assert env["BRIDGE_BOOTSTRAP_SERVERS"]["value"] == "kafka-0.kafka:9092,kafka-1.kafka:9092"


def test_the_values_file_validates_strict(template: Callable[..., str], tmp_path: Path) -> None:
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(template(DOC_VALUES, kube_version=KUBE_VERSIONS[-1]))
    result = kubernetes_validate(rendered, KUBE_VERSIONS[-1])
    assert result.returncode == 0, result.stdout + result.stderr
