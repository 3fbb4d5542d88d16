"""leave_group_on_shutdown=scale-in: the pod leaves for good iff its StatefulSet ordinal is at
or above the StatefulSet's desired replicas, read from a (here: local, plain HTTP) Kubernetes
API with the service-account token; anything unreadable means stay, with a reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.ops.statefulset import Pod, scale_in_verdict
from tests.support.kube import FakeKubernetesApi, fake_kubernetes_api


@pytest.fixture
def api() -> Iterator[tuple[FakeKubernetesApi, str]]:
    with fake_kubernetes_api() as state:
        yield state, state.url


def _pod(url: str | None, hostname: str = "eos-bridge-2") -> Pod:
    return Pod(hostname=hostname, api_url=url, namespace="streams", token="t0k", ca_file=None)


def test_the_highest_ordinal_after_a_scale_down_leaves(api: tuple[FakeKubernetesApi, str]) -> None:
    state, url = api
    verdict = scale_in_verdict(_pod(url, "eos-bridge-2"))
    assert verdict.leave and not verdict.unsure
    assert "ordinal 2 >= statefulset streams/eos-bridge's desired replicas 2" in verdict.why
    assert state.requests == [
        ("/apis/apps/v1/namespaces/streams/statefulsets/eos-bridge", "Bearer t0k")
    ]


@pytest.mark.parametrize("hostname", ["eos-bridge-0", "eos-bridge-1"])
def test_an_ordinal_below_the_replicas_is_a_restart_and_stays(
    api: tuple[FakeKubernetesApi, str], hostname: str
) -> None:
    verdict = scale_in_verdict(_pod(api[1], hostname))
    assert not verdict.leave and not verdict.unsure
    assert "a restart" in verdict.why


def test_scaled_to_zero_and_deleted_statefulsets_leave(api: tuple[FakeKubernetesApi, str]) -> None:
    state, url = api
    state.body = {"spec": {"replicas": 0}}
    assert scale_in_verdict(_pod(url, "eos-bridge-0")).leave
    state.body = {"spec": {"replicas": 3}, "metadata": {"deletionTimestamp": "2026-12-03T13:00Z"}}
    assert scale_in_verdict(_pod(url, "eos-bridge-0")).leave
    state.status, state.body = 404, {"kind": "Status", "code": 404}
    verdict = scale_in_verdict(_pod(url, "eos-bridge-0"))
    assert verdict.leave and "no longer exists" in verdict.why


@pytest.mark.parametrize(
    ("status", "body"), [(403, {"kind": "Status"}), (200, {"spec": {"replicas": "two"}})]
)
def test_an_unreadable_statefulset_stays_and_says_why(
    api: tuple[FakeKubernetesApi, str], status: int, body: object
) -> None:
    state, url = api
    state.status, state.body = status, body
    verdict = scale_in_verdict(_pod(url))
    assert not verdict.leave and verdict.unsure
    assert "\n" not in verdict.why and "streams/eos-bridge" in verdict.why


def test_an_unreachable_api_stays() -> None:
    verdict = scale_in_verdict(_pod("http://127.0.0.1:1"), timeout_s=2)
    assert not verdict.leave and verdict.unsure and "GET statefulset" in verdict.why


def test_outside_kubernetes_or_outside_a_statefulset_stays(
    api: tuple[FakeKubernetesApi, str],
) -> None:
    outside = scale_in_verdict(_pod(None))
    assert not outside.leave and not outside.unsure  # not a problem: nothing to scale in
    deployment = scale_in_verdict(_pod(api[1], "eos-bridge-7d9f8c6b5-x2k4q"))
    assert not deployment.leave and deployment.unsure and "<name>-<ordinal>" in deployment.why
    assert api[0].requests == []


def test_the_in_cluster_pod_reads_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "namespace").write_text("streams\n")
    (tmp_path / "token").write_text("abc\n")
    (tmp_path / "ca.crt").write_text("")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    pod = Pod.here(env, tmp_path)
    assert (pod.api_url, pod.namespace, pod.token) == ("https://10.0.0.1:443", "streams", "abc")
    assert pod.ca_file == tmp_path / "ca.crt"
    assert Pod.here({}, tmp_path / "absent").api_url is None
