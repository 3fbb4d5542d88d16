"""Start-up ACL checks on a broker too busy to answer: no traceback, the bridge starts."""

from __future__ import annotations

import logging
import signal
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation

from app import runner
from app.commands import cli, lag
from app.config import BridgeSettings
from app.errors import ConfigError
from app.kafka import access


class _Described:
    def __init__(self, ops: list[AclOperation] | None) -> None:
        self.authorized_operations = ops


class SlowAdmin:
    """describe_* futures that never complete (result(timeout) raises TimeoutError), or that
    fail with "coordinator loading" until ``answer_after`` calls have been made."""

    def __init__(self, answer_after: int | None = None) -> None:
        self.calls = 0
        self.answer_after = answer_after

    def _future(self) -> Future[Any]:
        self.calls += 1
        future: Future[Any] = Future()
        if self.answer_after is not None and self.calls > self.answer_after:
            future.set_result(_Described([AclOperation.READ]))
        elif self.answer_after is not None:
            future.set_exception(
                KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
            )
        return future

    def describe_topics(self, topics: Any, **_: Any) -> dict[str, Future[Any]]:
        return {name: self._future() for name in topics.topic_names}

    def describe_consumer_groups(self, groups: list[str], **_: Any) -> dict[str, Future[Any]]:
        return {group: self._future() for group in groups}


def test_no_answer_about_the_group_is_no_verdict(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="app.kafka.access"):
        assert access._group_operations(SlowAdmin(), "g", 0.3) is None  # type: ignore[arg-type]
    assert "group 'g' within startup_timeout=0s" in caplog.text


def test_a_loading_group_coordinator_is_asked_again() -> None:
    admin = SlowAdmin(answer_after=1)
    assert access._group_operations(admin, "g", 5.0) == [AclOperation.READ]  # type: ignore[arg-type]
    assert admin.calls == 2


def test_no_answer_about_topics_starts_anyway(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="app.kafka.access"):
        access.check_acls(
            SlowAdmin(), {}, read_topics=[("input_topics", "in")],  # type: ignore[arg-type]
            write_topics=[("output_topic", "out")], group="g", timeout=0.2,
            existing={"in", "out"},
        )  # fmt: skip
    assert "topic 'in'" in caplog.text and "topic 'out'" in caplog.text
    assert "group 'g'" in caplog.text


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (TimeoutError(), "did not answer a start-up request within startup_timeout="),
        (KafkaException(KafkaError(KafkaError._TIMED_OUT)), "cannot start: "),
    ],
)
def test_an_unanswered_start_up_request_is_one_line_and_exit_3(
    error: Exception, said: str, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    def never_answered(*_: Any, **__: Any) -> None:
        raise error

    monkeypatch.setattr(runner, "build", never_answered)
    settings = BridgeSettings(input_topics=["in"], output_topic="out", http_port=0)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with caplog.at_level(logging.ERROR, logger="app.runner"):
            assert runner.run(settings) == runner.EXIT_FATAL
    finally:
        signal.set_wakeup_fd(-1)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert said in line and "exiting so Kubernetes restarts the instance" in line


def test_a_tool_whose_request_is_not_answered_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never_answered(*_: Any, **__: Any) -> None:
        raise TimeoutError()

    monkeypatch.setattr(lag, "group_lag", never_answered)
    assert cli.main(["lag", "g"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == "eos-bridge lag: Kafka did not answer in time\n"


class FailingAdmin(SlowAdmin):
    """describe_topics futures that fail with ``error``."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__()
        self.error = error

    def describe_topics(self, topics: Any, **_: Any) -> dict[str, Future[Any]]:
        futures: dict[str, Future[Any]] = {}
        for name in topics.topic_names:
            futures[name] = Future()
            futures[name].set_exception(KafkaException(self.error))
        return futures


def test_a_topic_look_up_that_fails_for_another_reason_is_no_verdict(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nemesis round 12: "Failed while waiting for controller: Local: Timed out" while a
    coordinator broker was down is no missing ACL (it once ended the bridge with exit 2)."""
    timed_out = KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for controller")
    admin = FailingAdmin(timed_out)
    admin.answer_after = 0  # the group answers at once
    with caplog.at_level(logging.WARNING, logger="app.kafka.access"):
        access.check_acls(
            admin, {}, read_topics=[("input_topics", "in")], write_topics=[],  # type: ignore[arg-type]
            group="g", timeout=5.0, existing={"in"},
        )  # fmt: skip
    assert (
        "topic 'in' within startup_timeout=5s (Failed while waiting for controller)" in caplog.text
    )
    refused = FailingAdmin(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"))
    with pytest.raises(ConfigError, match="may not READ topic 'in' \\(input_topics\\): denied"):
        access.check_acls(
            refused, {}, read_topics=[("input_topics", "in")], write_topics=[],  # type: ignore[arg-type]
            group="g", timeout=5.0, existing={"in"},
        )  # fmt: skip
