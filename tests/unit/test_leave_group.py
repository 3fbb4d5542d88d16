"""The group leave after a clean stop (app.engine.departure.leave_group, which the runner
calls; its lines are the runner's logger's): who leaves, and a failure as one warning line,
never an exception; a bad value is refused naming the setting."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.config import BridgeSettings
from app.engine import departure
from app.errors import ConfigError
from app.kafka.leave import LeaveFailed
from app.ops.statefulset import Pod
from tests.support.cli import eos_bridge_here
from tests.support.kube import fake_kubernetes_api

BASE: dict[str, Any] = {"input_topics": ["in"], "output_topic": "out", "instance_id": "sts-1"}
OUTSIDE = Pod(hostname="sts-1", api_url=None, namespace=None, token=None, ca_file=None)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    made: list[tuple[Any, ...]] = []

    def remove(*args: Any) -> bool:
        made.append(args)
        return True

    monkeypatch.setattr(departure, "remove_static_member", remove)
    return made


def test_scale_in_is_the_default_and_outside_kubernetes_nothing_leaves(
    calls: list[tuple[Any, ...]], caplog: pytest.LogCaptureFixture
) -> None:
    settings = BridgeSettings(**BASE)
    assert settings.leave_group_on_shutdown == "scale-in"
    with caplog.at_level(logging.INFO, "app.runner"):
        assert departure.leave_group(settings, OUTSIDE) is False
    assert calls == []
    assert [r.levelname for r in caplog.records] == ["INFO"]
    assert "not running in Kubernetes" in caplog.text


def test_always_removes_this_instance_with_the_consumers_cluster_settings(
    calls: list[tuple[Any, ...]], caplog: pytest.LogCaptureFixture
) -> None:
    settings = BridgeSettings(
        **BASE, leave_group_on_shutdown="always", bootstrap_servers="k:9093",
        sasl_username="u", sasl_password="p", kafka={"security.protocol": "SASL_SSL"},
    )  # fmt: skip
    with caplog.at_level(logging.INFO, "app.runner"):
        assert departure.leave_group(settings, OUTSIDE) is True
    (bootstrap, common, group, instance, _reason, timeout) = calls[0]
    assert (bootstrap, group, instance) == ("k:9093", "eos-bridge", "sts-1")
    assert common["sasl.username"] == "u" and common["security.protocol"] == "SASL_SSL"
    assert timeout <= departure.LEAVE_TIMEOUT_S
    assert "removed static member 'sts-1'" in caplog.text


@pytest.mark.parametrize(
    "extra", [{"leave_group_on_shutdown": "never"}, {"static_membership": False}]
)
def test_never_and_dynamic_members_send_nothing(
    calls: list[tuple[Any, ...]], extra: dict[str, Any]
) -> None:
    settings = BridgeSettings(**BASE, **{"leave_group_on_shutdown": "always", **extra})
    assert departure.leave_group(settings, OUTSIDE) is False
    assert calls == []


def test_a_failed_removal_is_one_warning_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*_args: Any) -> bool:
        raise LeaveFailed("NoBrokersAvailable: NoBrokersAvailable")

    monkeypatch.setattr(departure, "remove_static_member", refuse)
    settings = BridgeSettings(**BASE, leave_group_on_shutdown="always")
    with caplog.at_level(logging.INFO, "app.runner"):
        assert departure.leave_group(settings, OUTSIDE) is False
    (record,) = caplog.records
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "session timeout" in record.getMessage() and "\n" not in record.getMessage()


def test_an_unreadable_statefulset_is_one_warning_line(
    calls: list[tuple[Any, ...]], caplog: pytest.LogCaptureFixture
) -> None:
    pod = Pod(hostname="sts-1", api_url="http://127.0.0.1:1", namespace="ns", token="t",
              ca_file=None)  # fmt: skip
    with caplog.at_level(logging.INFO, "app.runner"):
        assert departure.leave_group(BridgeSettings(**BASE), pod) is False
    assert calls == [] and [r.levelname for r in caplog.records] == ["WARNING"]


def test_a_bad_value_names_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"leave_group_on_shutdown \(BRIDGE_LEAVE_GROUP_ON"):
        from app.config import load_settings

        load_settings(**BASE, leave_group_on_shutdown="sometimes")
    env = {"BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPIC": "out",
           "BRIDGE_LEAVE_GROUP_ON_SHUTDOWN": "sometimes"}  # fmt: skip
    result = eos_bridge_here("check-config", env=env)
    assert result.code == 2 and "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert problems == [
        "  - leave_group_on_shutdown (BRIDGE_LEAVE_GROUP_ON_SHUTDOWN): "
        "Input should be 'scale-in', 'always' or 'never'"
    ]


def test_scale_in_reads_the_statefulset_then_removes_the_member(
    calls: list[tuple[Any, ...]],
) -> None:
    """The whole decision: sts-1 with replicas 1 leaves; with replicas 2 it is a restart."""
    with fake_kubernetes_api() as state:
        _scale_in(state, calls)


def _scale_in(state: Any, calls: list[tuple[Any, ...]]) -> None:
    pod = Pod(hostname="sts-1", api_url=state.url, namespace="ns", token="t", ca_file=None)
    state.body = {"spec": {"replicas": 1}}
    assert departure.leave_group(BridgeSettings(**BASE), pod) is True
    assert calls and calls[0][3] == "sts-1"
    assert "ordinal 1 >= statefulset ns/sts's desired replicas 1" in calls[0][4]
    state.body = {"spec": {"replicas": 2}}
    calls.clear()
    assert departure.leave_group(BridgeSettings(**BASE), pod) is False
    assert calls == []


def test_a_member_already_gone_is_one_info_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(departure, "remove_static_member", lambda *_args: False)
    settings = BridgeSettings(**BASE, leave_group_on_shutdown="always")
    with caplog.at_level(logging.INFO, "app.runner"):
        assert departure.leave_group(settings, OUTSIDE) is False
    (record,) = caplog.records
    assert record.levelname == "INFO" and "was no longer in group" in record.getMessage()
