"""A fenced static member joins again in-process once; a second fence within the window is a
live twin (exit 5). A KIP-848 member refused because its id is still held (its own killed
process) joins again every second for the session timeout and a margin, then exits 5. The built
bridge is a stand-in: what is tested is the runner's decision."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from app import runner
from app.config import BridgeSettings
from app.engine.rejoin import UNRELEASED_MARGIN_S, Rejoins
from app.errors import InstanceFenced, InstanceIdUnreleased

FENCE = InstanceFenced("the group coordinator fenced instance_id='i0' (group.instance.id)")
HELD = InstanceIdUnreleased("the group still holds a member with instance_id='i0'")


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


class _NoSleep:
    """runner's ``time``: the pause between two joins is not waited out in a unit test."""

    monotonic = staticmethod(lambda: 0.0)

    @staticmethod
    def sleep(_: float) -> None:
        return None


def _run_with(
    monkeypatch: pytest.MonkeyPatch,
    outcomes: list[InstanceFenced | None],
    now: list[float],
    released: list[bool] | None = None,
) -> tuple[int, list[_Built]]:
    """``released``: the outcome of each release of the held id (default: it fails)."""
    built: list[_Built] = []

    def build(*_: Any, **__: Any) -> _Built:
        built.append(_Built(outcomes[len(built)]))
        return built[-1]

    clock = iter(now)
    monkeypatch.setattr(runner, "build", build)
    monkeypatch.setattr(runner, "time", _NoSleep)
    releases = iter(released or [False])

    def rejoins(window: float, _: object, release: object) -> Rejoins:
        return Rejoins(window, lambda: 6.0, lambda: next(clock), release=lambda: next(releases))

    monkeypatch.setattr(runner, "Rejoins", rejoins)
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


def test_a_held_instance_id_is_joined_again_until_its_session_has_expired(
    monkeypatch: pytest.MonkeyPatch, signals: None
) -> None:
    """The group's session timeout (6 s here) and the margin: refusals within it are retried
    in-process, as many as come (one a second), then the member joins: exit 0 at the end."""
    within = [0.0, 1.0, 2.0, 6.0 + UNRELEASED_MARGIN_S - 1]
    code, built = _run_with(monkeypatch, [HELD, HELD, HELD, HELD, None], within)
    assert code == runner.EXIT_OK and len(built) == 5


def test_a_held_instance_id_past_its_session_timeout_is_a_live_twin_exit_5(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, signals: None
) -> None:
    past = [float(t) for t in range(0, 30, 1)]  # one refusal a second, 6 s + 15 s allowed
    with caplog.at_level(logging.ERROR, logger="app.runner"):
        code, built = _run_with(monkeypatch, [HELD] * 30 + [None], past)
    assert code == runner.EXIT_FENCED
    assert len(built) == int(6.0 + UNRELEASED_MARGIN_S) + 1  # refused at t = 0 .. 21
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "longer than its session timeout" in line and "instance_id='i0'" in line


def test_a_held_instance_id_is_released_once_and_joined_at_once(
    monkeypatch: pytest.MonkeyPatch, signals: None
) -> None:
    """The first refusal removes the member that holds the id and joins again without waiting
    (a classic static member replaces its old one so); a refusal after it waits as above, and
    the release is not tried a second time (two live twins would take turns removing each
    other)."""
    code, built = _run_with(monkeypatch, [HELD, None], [0.0], released=[True])
    assert code == runner.EXIT_OK and len(built) == 2
    past = [float(t) for t in range(0, 30, 1)]
    code, built = _run_with(monkeypatch, [HELD] * 30 + [None], past, released=[True])
    assert code == runner.EXIT_FENCED and len(built) == int(6.0 + UNRELEASED_MARGIN_S) + 2
