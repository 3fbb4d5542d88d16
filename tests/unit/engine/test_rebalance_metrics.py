"""Rebalance observability (issue 54 scope 5): each callback timed and its partitions counted by
kind, under both protocols; the per-partition commit age, reset by a committed transaction that
moves the partition's position and dropped with the partition on a revoke or a loss."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from tests.unit.engine.test_checkpoint_and_rebalance import Rig

KINDS = ("assign", "revoke", "lost")


def _tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("in", p) for p in partitions]


def _sample(rig: Rig, name: str, **labels: str) -> float | None:
    return rig.metrics.registry.get_sample_value(name, labels)


def _partitions(rig: Rig) -> dict[str, float | None]:
    return {k: _sample(rig, "eos_bridge_rebalance_partitions_total", kind=k) for k in KINDS}


def _timed(rig: Rig) -> dict[str, float | None]:
    return {k: _sample(rig, "eos_bridge_rebalance_callback_seconds_count", kind=k) for k in KINDS}


def _ages(rig: Rig) -> dict[int, float]:
    """Partition of topic "in" -> its commit age, for every series exported."""
    ages = {}
    for family in rig.metrics.registry.collect():
        if family.name == "eos_bridge_partition_commit_age_seconds":
            for sample in family.samples:
                ages[int(sample.labels["partition"])] = sample.value
    return ages


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _clocked(rig: Rig) -> Clock:
    clock = Clock()
    rig.metrics.commit_age._clock = clock
    return clock


def test_eager_callbacks_count_the_whole_assignment_each_time() -> None:
    rig = Rig(assignment=[])
    rig.callback_with("on_assign", _tps(0, 1, 2))
    rig.callback_with("on_revoke", _tps(0, 1, 2))
    rig.callback_with("on_assign", _tps(0, 1))
    rig.rebalancer.raise_pending()
    assert _partitions(rig) == {"assign": 5, "revoke": 3, "lost": None}
    assert _timed(rig) == {"assign": 2, "revoke": 1, "lost": None}
    assert _sample(rig, "eos_bridge_rebalances_total", kind="assign") == 2


def test_incremental_callbacks_count_only_the_partitions_that_change() -> None:
    rig = Rig(incremental=True, assignment=[("in", 0), ("in", 1), ("in", 2)])
    rig.callback_with("on_assign", _tps(3))
    rig.callback_with("on_revoke", _tps(2))
    rig.callback_with("on_lost", _tps(0))
    rig.rebalancer.raise_pending()
    assert _partitions(rig) == {"assign": 1, "revoke": 1, "lost": 1}
    assert _timed(rig) == {"assign": 1, "revoke": 1, "lost": 1}
    seconds = _sample(rig, "eos_bridge_rebalance_callback_seconds_sum", kind="revoke")
    assert seconds is not None and seconds >= 0


def test_a_failed_callback_is_timed_and_counted_too() -> None:
    rig = Rig(assignment=[])

    def refuse(partitions: list[TopicPartition]) -> None:
        raise RuntimeError("assign refused")

    rig.consumer.assign = refuse  # type: ignore[method-assign]
    rig.callback_with("on_assign", _tps(0, 1))
    assert _partitions(rig)["assign"] == 2 and _timed(rig)["assign"] == 1


def test_commit_age_restarts_when_a_commit_moves_the_partition() -> None:
    rig = Rig(incremental=True, assignment=[])
    clock = _clocked(rig)
    rig.callback_with("on_assign", _tps(0, 1))
    clock.now += 30
    assert _ages(rig) == {0: 30.0, 1: 30.0}  # since the assignment: nothing committed yet
    rig.consumer.positions = {("in", 0): 10}  # partition 1 has not moved
    rig.checkpoint.record(5, started=0.0)
    rig.checkpoint.commit()
    clock.now += 20
    assert _ages(rig) == {0: 20.0, 1: 50.0}
    rig.checkpoint.record(1, started=0.0)
    rig.checkpoint.commit()  # position 10 committed already: partition 0 did not advance
    clock.now += 5
    assert _ages(rig) == {0: 25.0, 1: 55.0}


def test_commit_age_series_go_with_revoked_and_lost_partitions() -> None:
    rig = Rig(incremental=True, assignment=[])
    clock = _clocked(rig)
    rig.callback_with("on_assign", _tps(0, 1, 2))
    for partition in ("0", "1", "2"):
        rig.metrics.lag.labels("in", partition).set(4)
    rig.callback_with("on_revoke", _tps(1))
    rig.callback_with("on_lost", _tps(2))
    rig.rebalancer.raise_pending()
    clock.now += 7
    assert _ages(rig) == {0: 7.0}
    lag = [_sample(rig, "eos_bridge_consumer_lag_records", topic="in", partition=p) for p in "012"]
    assert lag == [4, None, None]  # the lag series go the same way (Metrics.forget_partitions)


def test_eager_reassignment_starts_the_ages_again() -> None:
    rig = Rig(assignment=[])
    clock = _clocked(rig)
    rig.callback_with("on_assign", _tps(0, 1))
    clock.now += 40
    rig.callback_with("on_revoke", _tps(0, 1))
    assert _ages(rig) == {}  # every partition revoked: no series left
    rig.callback_with("on_assign", _tps(1))
    clock.now += 3
    assert _ages(rig) == {1: 3.0}


def test_a_partition_revoked_before_a_late_commit_gets_no_series_back() -> None:
    rig = Rig(incremental=True, assignment=[])
    rig.callback_with("on_assign", _tps(0))
    rig.callback_with("on_revoke", _tps(0))
    rig.metrics.commit_age.advanced([("in", 0)])
    assert _ages(rig) == {}
