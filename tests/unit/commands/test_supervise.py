"""The supervisor's restart budget (pure) and its reactions to child exit codes."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from app.commands.supervise import RestartBudget, Supervisor, child_settings, exit_status
from app.kafka.defaults import stuck_call_deadline


def test_budget_allows_n_restarts_within_the_window() -> None:
    budget = RestartBudget(max_restarts=3, window_s=60)
    assert [budget.allow(t) for t in (0, 1, 2)] == [True, True, True]
    assert not budget.allow(3), "a fourth restart within 60 s is a crash loop"
    assert not budget.allow(59.9)
    assert budget.allow(60), "the first restart left the window"
    assert budget.used == 3


def test_a_refused_restart_is_not_counted() -> None:
    budget = RestartBudget(max_restarts=1, window_s=10)
    assert budget.allow(0)
    assert not budget.allow(5) and not budget.allow(9)
    assert budget.allow(10) and budget.used == 1


def test_zero_restarts_means_never() -> None:
    assert not RestartBudget(max_restarts=0, window_s=10).allow(0)


def _child(tmp_path: Path, codes: list[int]) -> list[str]:
    """A child that exits with the next of ``codes`` on each start (a counter file)."""
    counter = tmp_path / "starts"
    script = (
        f"import pathlib, sys; p = pathlib.Path({str(counter)!r}); "
        f"n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); "
        f"sys.exit({codes!r}[min(n, {len(codes) - 1})])"
    )
    return [sys.executable, "-S", "-c", script]  # -S: no site packages to import


def _starts(tmp_path: Path) -> int:
    return int((tmp_path / "starts").read_text())


@pytest.mark.parametrize("final", [0, 2, 4, 1])
def test_exit_3_and_5_restart_any_other_code_is_final(tmp_path: Path, final: int) -> None:
    clock = iter(range(100)).__next__
    sup = Supervisor(_child(tmp_path, [3, 5, final]), RestartBudget(5, 600), clock=clock)
    assert sup.run() == final
    assert _starts(tmp_path) == 3


def test_gives_up_with_the_childs_code_after_the_budget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sup = Supervisor(_child(tmp_path, [3]), RestartBudget(2, 600), clock=lambda: 0.0)
    assert sup.run() == 3
    assert _starts(tmp_path) == 3, "the first start and two restarts"
    assert "2 restarts within 600s already" in caplog.text
    assert caplog.text.count("at once") == 2


def test_no_restart_after_a_forwarded_sigterm(tmp_path: Path) -> None:
    """The child sends SIGTERM to the supervisor (this process), which forwards it; the child
    then exits 3 (as a shutdown past its deadline does) and is not restarted."""
    counter = tmp_path / "starts"
    script = (
        "import os, pathlib, signal, sys, time; "
        f"p = pathlib.Path({str(counter)!r}); p.write_text(str(int(p.read_text() or 0) + 1) "
        "if p.exists() else '1'); "
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(3)); "
        "os.kill(os.getppid(), signal.SIGTERM); time.sleep(600)"
    )
    sup = Supervisor([sys.executable, "-S", "-c", script], RestartBudget(5, 600))
    previous = signal.signal(signal.SIGTERM, sup.forward)
    try:
        assert sup.run() == 3
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert _starts(tmp_path) == 1


def test_a_sigterm_while_a_child_starts_reaches_that_child(tmp_path: Path) -> None:
    """SIGTERM handled while a restarted child was being started (no child to forward it to):
    the new child gets it at once, instead of running until the kubelet's SIGKILL."""
    sleeper = [sys.executable, "-S", "-c", "import time; time.sleep(60)"]  # 0 if never signalled
    sup = Supervisor(sleeper, RestartBudget(5, 600))
    sup.forward(signal.SIGTERM)  # no child yet: only noted
    assert sup.run() == 128 + signal.SIGTERM, "the sleeper ended by the forwarded SIGTERM"


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (3, 3), (-9, 137), (-15, 143)])
def test_exit_status_is_the_shells(returncode: int, status: int) -> None:
    assert exit_status(returncode) == status


def test_stuck_call_deadline_follows_the_failover_timeouts() -> None:
    """Derived from request/session timeouts, capped at the old fixed call_timeout + 15 s."""
    assert stuck_call_deadline(30, {}, {}, {}) == 45, "librdkafka defaults: the old deadline"
    fast = stuck_call_deadline(30, {}, {"session.timeout.ms": 6000}, {"request.timeout.ms": 5000})
    assert fast == 12, "the chaos suite's timeouts: 2 x 6 s"
    assert stuck_call_deadline(30, {"request.timeout.ms": 8000, "session.timeout.ms": 3000},
                               {}, {}) == 16  # fmt: skip
    assert stuck_call_deadline(5, {}, {"session.timeout.ms": 6000}, {}) == 20, "capped"
    # group_protocol=consumer: the broker holds the session timeout, read at start-up
    assert stuck_call_deadline(30, {}, {}, {"request.timeout.ms": 5000}, 6000) == 12
    assert stuck_call_deadline(30, {}, {}, {}, None) == 45, "the broker did not say: 45 s"


def test_child_settings_follow_the_bridges_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's lines take the bridge's log format (the chart's default is JSON) and
    it watches the bridge's own HTTP port, from env, BRIDGE_CONFIG_FILE or --config."""
    for name in ("BRIDGE_LOG_FORMAT", "BRIDGE_LOG_LEVEL", "BRIDGE_HTTP_PORT", "BRIDGE_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    defaults = child_settings(["run"])
    assert (defaults.log_format, defaults.log_level, defaults.http_port) == ("text", "INFO", 9000)

    monkeypatch.setenv("BRIDGE_LOG_FORMAT", "json")
    monkeypatch.setenv("BRIDGE_INPUT_TOPICS", "in")  # the bridge's other settings: ignored
    assert child_settings(["run"]).log_format == "json"

    config = tmp_path / "bridge.yaml"
    config.write_text("log_level: WARNING\nhttp_port: 9100\noutput_topic: out\n")
    for child in (["run", "--config", str(config)], ["run", f"--config={config}"]):
        settings = child_settings(child)
        assert (settings.log_format, settings.log_level, settings.http_port) == (
            "json", "WARNING", 9100,
        ), child  # fmt: skip
    monkeypatch.setenv("BRIDGE_CONFIG_FILE", str(config))
    assert child_settings(["run"]).http_port == 9100


def test_child_settings_that_do_not_load_are_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong setting is the child's to report (one line, exit 2): the supervisor starts it."""
    monkeypatch.setenv("BRIDGE_LOG_FORMAT", "xml")
    assert child_settings(["run"]).log_format == "text"
    monkeypatch.delenv("BRIDGE_LOG_FORMAT")
    assert child_settings(["run", "--config", str(tmp_path / "missing.yaml")]).http_port == 9000
