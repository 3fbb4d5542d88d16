"""Dead-letter accounting: one summary line per checkpoint, metrics per step and error class,
and the max_dead_letter_ratio readiness verdict over a time window."""

from __future__ import annotations

import logging

import pytest

from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline.errors import InvalidRoute
from app.pipeline.record import Failure, Row
from app.sink.deadletters import DeadLetters, Tally, merge, summary_line


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def failure(offset: int, step: str = "steps[0].set", error: Exception | None = None) -> Failure:
    row = Row({}, None, None, "in", 0, offset, 0)
    return Failure(row, step, error or NameError(f"name 'amout' is not defined ({offset})"))


def make(max_ratio: float | None = 0.5) -> tuple[DeadLetters, Metrics, Health, Clock]:
    metrics, health, clock = Metrics(), Health(30), Clock()
    health.set_ready(True, "running")
    return DeadLetters(metrics, health, max_ratio, 60, clock=clock), metrics, health, clock


def counted(metrics: Metrics, step: str, cls: str) -> float:
    labels = {"step": step, "error_class": cls}
    return metrics.registry.get_sample_value("eos_bridge_dead_letter_records_total", labels) or 0


def test_summary_line_counts_per_step_and_class_with_the_first_example() -> None:
    tallies = {
        ("route", "InvalidRoute"): Tally(2, "in[0]@7: route returned 42"),
        ("steps[0].set", "NameError"): Tally(5, "in[0]@1: name 'amout' is not defined"),
    }
    assert summary_line(tallies, 100) == (
        "dead-lettered 7 of 100 records in this checkpoint: "
        "step 'steps[0].set' NameError 5 (first in[0]@1: name 'amout' is not defined); "
        "step 'route' InvalidRoute 2 (first in[0]@7: route returned 42)"
    )


def test_merge_sums_counts_and_keeps_the_earliest_example() -> None:
    a = {("s", "E"): Tally(1, "first")}
    b = {("s", "E"): Tally(2, "later"), ("t", "F"): Tally(1, "other")}
    assert merge([a, b]) == {("s", "E"): Tally(3, "first"), ("t", "F"): Tally(1, "other")}
    assert a[("s", "E")].count == 1  # inputs untouched


def test_one_summary_line_per_checkpoint_and_only_committed_letters_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead, metrics, _, _ = make(None)
    with caplog.at_level(logging.WARNING, "app.sink.deadletters"):
        for i in range(500):
            dead.add(failure(i))
        dead.discard()  # aborted: those 500 were never written
        for i in range(300):
            dead.add(failure(i))
        dead.add(failure(300, "route", InvalidRoute("route returned 42")))
        dead.account(1000)
        dead.account(1000)  # nothing dead-lettered: no line
    assert [r.getMessage()[:52] for r in caplog.records] == [
        "dead-lettered 301 of 1000 records in this checkpoint"
    ]
    assert "(first in[0]@0: name 'amout'" in caplog.records[0].getMessage()
    assert counted(metrics, "steps[0].set", "NameError") == 300
    assert counted(metrics, "route", "InvalidRoute") == 1


def test_ratio_over_the_limit_marks_not_ready_once_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead, metrics, health, clock = make(0.5)
    with caplog.at_level(logging.WARNING, "app.sink.deadletters"):
        for checkpoint in range(3):
            for i in range(60):
                dead.add(failure(checkpoint * 100 + i))
            dead.account(100)
            clock.now += 1
    ready, reason = health.readiness()
    assert not ready
    assert "max_dead_letter_ratio=0.5" in reason and "'steps[0].set' NameError" in reason
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # the crossing is logged once, not per checkpoint
    assert errors[0].startswith("dead-letter ratio 60.0% over the last 60s exceeds")
    assert "step 'steps[0].set' fails most, with NameError (60 of 100 records" in errors[0]
    ratio = metrics.registry.get_sample_value(
        "eos_bridge_dead_letter_ratio", {"step": "steps[0].set", "error_class": "NameError"}
    )
    assert ratio == pytest.approx(0.6)
    # Clean traffic: once the bad checkpoints leave the 60 s window, ready again.
    clock.now += 60
    dead.account(100)
    assert health.readiness() == (True, "running")
    assert "back within max_dead_letter_ratio=0.5" in caplog.records[-1].getMessage()
    assert (
        metrics.registry.get_sample_value(
            "eos_bridge_dead_letter_ratio", {"step": "steps[0].set", "error_class": "NameError"}
        )
        == 0
    )


def test_no_verdict_on_too_few_records_and_none_without_a_limit() -> None:
    dead, _, health, _ = make(0.5)
    dead.add(failure(0))
    dead.account(1)  # 100 % of one record says little
    assert health.readiness()[0]
    dead, _, health, _ = make(None)
    for i in range(200):
        dead.add(failure(i))
    dead.account(200)
    assert health.readiness()[0]
