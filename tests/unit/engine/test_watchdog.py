"""The watchdog ends a stuck call (librdkafka ignoring its own timeout) from outside."""

from __future__ import annotations

import logging
import threading

import pytest

from app.engine.watchdog import Watchdog
from app.ops.health import Health


class Exits:
    """Stands in for os._exit: records the code and releases the stuck 'call'."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.done = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.done.set()


def test_a_call_past_its_deadline_is_named_fails_livez_and_exits_3(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health, exits = Health(stale_after=30.0), Exits()
    watchdog = Watchdog(health, on_overrun=exits, tick=0.01).start()
    try:
        with (
            caplog.at_level(logging.CRITICAL, "app.engine.watchdog"),
            watchdog.guard("send_offsets_to_transaction", 0.05, "coordinator broker 2"),
        ):
            assert exits.done.wait(30), "the watchdog never fired"  # the 'stuck call'
    finally:
        watchdog.stop()
    assert exits.codes == [3]
    assert not health.alive() and health.stuck == "send_offsets_to_transaction stuck"
    line = caplog.records[-2].getMessage()
    assert "send_offsets_to_transaction did not return within its deadline" in line
    assert "coordinator broker 2" in line and "exiting with code 3" in line


def test_a_call_that_returns_in_time_is_forgotten() -> None:
    health, exits = Health(stale_after=30.0), Exits()
    watchdog = Watchdog(health, on_overrun=exits, tick=0.01)
    with watchdog.guard("commit_transaction", 3600.0):
        assert watchdog.busy() == ["commit_transaction"]
    assert watchdog.busy() == [] and exits.codes == [] and health.alive()


def test_a_stale_step_is_reported_by_name_before_its_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health, exits = Health(stale_after=30.0), Exits()
    reported = threading.Event()

    class Flag(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "has been running" in record.getMessage():
                reported.set()

    handler = Flag()
    logging.getLogger("app.engine.watchdog").addHandler(handler)
    watchdog = Watchdog(health, stale_after=0.0, on_overrun=exits, tick=0.01).start()
    try:
        with watchdog.guard("step 'enrich'", 3600.0):
            assert reported.wait(30), "the stale step was never reported"
            assert health.stuck is not None and "step 'enrich'" in health.stuck
            assert not health.alive()
    finally:
        watchdog.stop()
        logging.getLogger("app.engine.watchdog").removeHandler(handler)
    assert exits.codes == []


def test_shutdown_deadline_ends_a_process_stuck_after_sigterm() -> None:
    health, exits = Health(stale_after=30.0), Exits()
    watchdog = Watchdog(health, on_overrun=exits, tick=0.01).start()
    try:
        with watchdog.guard("abort_transaction", 3600.0):
            watchdog.exit_within(0.0, "SIGTERM not honoured within shutdown_timeout=30s")
            assert exits.done.wait(30), "the shutdown deadline never fired"
    finally:
        watchdog.stop()
    assert exits.codes == [3]


def test_an_overrun_logs_every_thread_stack_naming_the_stuck_function(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health, exits = Health(stale_after=30.0), Exits()
    watchdog = Watchdog(health, on_overrun=exits, tick=0.01).start()

    def stuck_in_send_offsets() -> None:
        with watchdog.guard("send_offsets_to_transaction", 0.05):
            assert exits.done.wait(30), "the watchdog never fired"

    try:
        with caplog.at_level(logging.CRITICAL, "app.engine.watchdog"):
            stuck_in_send_offsets()
    finally:
        watchdog.stop()
    dump = caplog.records[-1]
    assert dump.levelno == logging.CRITICAL
    assert "stuck_in_send_offsets" in dump.getMessage()
