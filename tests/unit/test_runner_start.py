"""The start of the process (app.runner): SIGTERM while the bridge is being built (waiting for
an unreachable broker or registry) leaves at once with exit 0; librdkafka refusing a client's
configuration is a setting mistake (exit 2), a registry still away is exit 3."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from app import runner
from app.serde.registry import RegistryUnavailable


class Settings:
    startup_timeout = 30.0


def test_sigterm_while_building_leaves_the_build_with_exit_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = runner._Stop()
    reached: list[str] = []

    def build(*_a: Any, **_kw: Any) -> Any:
        stop(signal.SIGTERM, None)  # what the handler does when the signal comes now
        reached.append("after the signal")  # never: the build is left at once
        raise AssertionError("not reached")

    monkeypatch.setattr(runner, "build", build)
    assert runner._build_unless_stopped(stop, Settings(), None, None, None) == runner.EXIT_OK
    assert reached == [] and stop.requested and not stop.building


def test_a_signal_after_the_build_only_asks_the_bridge_to_stop() -> None:
    stop = runner._Stop()
    stop(signal.SIGTERM, None)  # not building: no exception, the loop stops by the flag
    assert stop.requested
    assert runner._build_unless_stopped(stop, Settings(), None, None, None) == runner.EXIT_OK


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (KafkaException(KafkaError(KafkaError._INVALID_ARG, "bad value")), runner.EXIT_CONFIG),
        (KafkaException(KafkaError(KafkaError._TRANSPORT, "down")), runner.EXIT_FATAL),
        (RegistryUnavailable("schema registry away"), runner.EXIT_FATAL),
    ],
)
def test_start_failures_have_their_exit_codes(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException, code: int
) -> None:
    def build(*_a: Any, **_kw: Any) -> Any:
        raise raised

    monkeypatch.setattr(runner, "build", build)
    assert runner._build(Settings(), None, None, None) == code  # type: ignore[arg-type]
