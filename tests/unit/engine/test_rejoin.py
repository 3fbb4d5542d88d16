"""A fenced static member joins again in-process once; a second fence within the window is a
live twin (exit 5). The built bridge is a stand-in: what is tested is the runner's decision."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from app import runner
from app.config import BridgeSettings
from app.errors import InstanceFenced

FENCE = InstanceFenced("the group coordinator fenced instance_id='i0' (group.instance.id)")


class _Built:
    """Raises ``fence`` from run() (or returns: a clean stop); records its close."""

    def __init__(self, fence: InstanceFenced | None) -> None:
        self.fence = fence
        self.stopping = False
        self.closed = False

    def run(self) -> None:
        if self.fence is not None:
            raise self.fence

    def close_after_failure(self) -> None:
        self.closed = True


@pytest.fixture
def signals() -> Iterator[None]:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    signal.set_wakeup_fd(-1)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _run_with(
    monkeypatch: pytest.MonkeyPatch, outcomes: list[InstanceFenced | None], now: list[float]
) -> tuple[int, list[_Built]]:
    built: list[_Built] = []

    def build(*_: Any, **__: Any) -> _Built:
        built.append(_Built(outcomes[len(built)]))
        return built[-1]

    clock, rejoins = iter(now), runner._Rejoins
    monkeypatch.setattr(runner, "build", build)
    monkeypatch.setattr(runner, "_Rejoins", lambda window: rejoins(window, lambda: next(clock)))
    settings = BridgeSettings(input_topics=["in"], output_topic="out", http_port=0)
    return runner.run(settings), built


def test_one_fence_is_answered_in_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, signals: None
) -> None:
    with caplog.at_level(logging.WARNING, logger="app.runner"):
        code, built = _run_with(monkeypatch, [FENCE, None], [0.0])
    assert code == runner.EXIT_OK
    assert len(built) == 2 and built[0].closed and not built[1].closed
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "instance_id='i0'" in line and "joining the group again in-process" in line


def test_fences_further_apart_than_the_window_are_each_answered(
    monkeypatch: pytest.MonkeyPatch, signals: None
) -> None:
    later = runner.REJOIN_WINDOW_S + 1
    code, built = _run_with(monkeypatch, [FENCE, FENCE, None], [0.0, later])
    assert code == runner.EXIT_OK and len(built) == 3


def test_a_second_fence_within_the_window_is_a_twin_exit_5(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, signals: None
) -> None:
    soon = runner.REJOIN_WINDOW_S - 1
    with caplog.at_level(logging.ERROR, logger="app.runner"):
        code, built = _run_with(monkeypatch, [FENCE, FENCE, None], [0.0, soon])
    assert code == runner.EXIT_FENCED and len(built) == 2 and built[1].closed
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.startswith("fenced: ") and "instance_id='i0'" in line
