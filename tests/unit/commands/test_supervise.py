"""The supervisor's restart budget (pure) and its reactions to child exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.commands.supervise import RestartBudget, Supervisor
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
    sup = Supervisor(_child(tmp_path, [3]), RestartBudget(5, 600))
    sup.forward(15)  # before the child runs: it ends on its own with 3, and stays ended
    assert sup.run() == 3 and _starts(tmp_path) == 1


def test_stuck_call_deadline_follows_the_failover_timeouts() -> None:
    """Derived from request/session timeouts, capped at the old fixed call_timeout + 15 s."""
    assert stuck_call_deadline(30, {}, {}, {}) == 45, "librdkafka defaults: the old deadline"
    fast = stuck_call_deadline(30, {}, {"session.timeout.ms": 6000}, {"request.timeout.ms": 5000})
    assert fast == 12, "the chaos suite's timeouts: 2 x 6 s"
    assert stuck_call_deadline(30, {"request.timeout.ms": 8000, "session.timeout.ms": 3000},
                               {}, {}) == 16  # fmt: skip
    assert stuck_call_deadline(5, {}, {"session.timeout.ms": 6000}, {}) == 20, "capped"
