"""The latency mode's arithmetic on synthetic data: percentiles, matching, clock, rates."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from bench.latency_stats import (
    HostClock,
    Seen,
    Sent,
    cdf,
    common_rate,
    offered_rates,
    paced,
    percentile,
    summarise,
    visible_times,
    wall_drift_ms,
)


def test_nearest_rank_percentiles() -> None:
    values = [float(x) for x in range(1, 1001)]  # 1..1000, shuffled order must not matter
    shuffled = values[::2] + values[1::2]
    assert percentile(shuffled, 50) == 500
    assert percentile(shuffled, 99) == 990
    assert percentile(shuffled, 99.9) == 999
    assert percentile(shuffled, 100) == 1000
    assert percentile([7.0], 99.9) == 7.0


def test_a_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_p1_outputs_match_their_input_by_id() -> None:
    sent = [Sent("r1", 0, 1000.0), Sent("r2", 0, 1010.0), Sent("r3", 0, 1020.0)]
    seen = [Seen("r2", 0, 1110.0), Seen("r1", 0, 1110.0)]  # r3 never visible
    assert visible_times(sent, seen) == [1110.0, 1110.0, None]


def test_a_coalesced_count_is_visible_with_the_later_count_that_covers_it() -> None:
    """P2: offsets 5 and 9 of key k; a cache emitted only the count of offset 9."""
    sent = [Sent("k", 5, 1000.0), Sent("k", 9, 1050.0), Sent("j", 7, 1000.0)]
    seen = [Seen("k", 9, 1300.0), Seen("j", 6, 1100.0)]  # j's output is of an older input
    assert visible_times(sent, seen) == [1300.0, 1300.0, None]


def test_the_earliest_covering_output_counts() -> None:
    sent = [Sent("k", 1, 0.0)]
    seen = [Seen("k", 3, 500.0), Seen("k", 1, 900.0), Seen("k", 2, 400.0)]
    assert visible_times(sent, seen) == [400.0]


def test_summary_measures_the_window_only_and_unseen_records_are_infinitely_late() -> None:
    sent = [Sent(f"r{i}", 0, float(i)) for i in range(2000)]
    # 0..999 before the window; in the window (1000..1999): latency = 100 + i % 100,
    # except the last 5, never visible
    seen = [Seen(f"r{i}", 0, i + 100.0 + i % 100) for i in range(1995)]
    out = summarise(sent, seen, (1000.0, 2000.0))
    assert out["samples"] == 1000
    assert out["unseen"] == 5
    assert out["negative"] == 0
    assert out["p50_ms"] == 149.0
    assert out["p99_ms"] == 199.0  # 5 unseen of 1000: within the top 1 %
    assert out["p99_9_ms"] == math.inf  # but not within the top 0.1 %
    assert out["max_ms"] == math.inf


def test_summary_counts_outputs_visible_before_their_input_was_sent() -> None:
    sent = [Sent("a", 0, 100.0), Sent("b", 0, 100.0)]
    out = summarise(sent, [Seen("a", 0, 90.0), Seen("b", 0, 150.0)], (0.0, 1000.0))
    assert out["negative"] == 1
    assert out["max_ms"] == 50.0


def test_an_empty_window_is_an_error_not_a_zero_latency() -> None:
    with pytest.raises(ValueError, match="window"):
        summarise([Sent("a", 0, 5.0)], [], (10.0, 20.0))


def test_the_host_clock_ignores_a_wall_clock_step() -> None:
    clock = HostClock(wall_s=1_000_000.0, mono_s=50.0)
    assert clock.ms(50.0) == 1_000_000_000.0
    assert clock.ms(52.5) == 1_000_002_500.0
    # at monotonic 60 the wall clock reads 1 s ahead of the anchored clock: an NTP step
    assert wall_drift_ms(clock, wall_s=1_000_011.0, mono_s=60.0) == pytest.approx(1000.0)
    assert clock.ms(60.0) == 1_000_010_000.0  # latencies keep using the anchored time


def test_the_cdf_is_monotonic_and_leaves_unseen_records_below_one() -> None:
    lat = [float(x) for x in range(1, 1000)] + [math.inf]
    points = cdf(lat, points=50)
    assert points[-1] == (999.0, 0.999)
    assert all(a[0] <= b[0] and a[1] < b[1] for a, b in itertools.pairwise(points))
    assert cdf([math.inf]) == []


def test_offered_loads_are_fractions_of_the_contenders_own_max() -> None:
    assert offered_rates(40_000.0, [0.25, 0.5, 0.75]) == [10_000, 20_000, 30_000]
    assert offered_rates(0.0, [0.5]) == [1]


def test_the_common_rate_is_half_the_slowest_kafka_streams_else_the_slowest() -> None:
    mx = {"bridge-eos": 100_000.0, "kstreams-eos": 40_000.0, "quix-eos": 10_000.0}
    assert common_rate(mx, ["kstreams-eos"]) == 20_000
    assert common_rate({"bridge-eos": 100_000.0, "quix-eos": 10_000.0}, ["kstreams-eos"]) == 5000
    assert common_rate({}, ["kstreams-eos"]) is None


def test_the_load_keeps_its_schedule_and_drops_a_backlog_instead_of_bursting() -> None:
    base, due = paced(0, 1.0, 1000, sent=990, max_lag_s=0.1)
    assert (base, due) == (0, 1000)  # 10 behind: within 0.1 s of schedule, sent as due
    base, due = paced(0, 2.0, 1000, sent=1000, max_lag_s=0.1)  # stalled for a second
    assert (base, due) == (-900, 1100)  # only 0.1 s of backlog is sent
    assert paced(base, 2.5, 1000, sent=1550, max_lag_s=0.1) == (-900, 1600)  # on schedule again


def _lat(contender: str, interval: float, load: str, p99: float, rep: int = 0) -> dict[str, Any]:
    return {
        "pipeline": "p1", "commit_interval": interval, "contender": contender, "load": load,
        "rep": rep, "rate": 1000, "achieved_rate": 990.0, "p50_ms": p99 / 2, "p99_ms": p99,
        "p99_9_ms": p99, "max_ms": p99, "unseen": 0, "samples": 100, "drained": True,
    }  # fmt: skip


def _run(contender: str, interval: float, rps: float, rep: int = 0) -> dict[str, Any]:
    return {
        "pipeline": "p1", "commit_interval": interval, "contender": contender, "rep": rep,
        "records_per_s": rps,
    }  # fmt: skip


def test_the_report_checks_the_issue_goals_from_medians_and_same_repetition_ratios() -> None:
    from bench.report_latency import interval_goals, summarise_latency

    latency = [
        _lat("bridge-eos", 0.1, "common", 150.0), _lat("bridge-eos", 0.1, "common", 250.0, 1),
        _lat("bridge-eos", 0.1, "common", 180.0, 2), _lat("kstreams-eos", 0.1, "common", 400.0),
        _lat("bridge-eos", 1.0, "50%", 1200.0), _lat("old-format", 1.0, "50%", 1.0),
    ]  # fmt: skip
    del latency[-1]["pipeline"]  # reports of before this mode: ignored
    rows = summarise_latency(latency)
    assert [(r["contender"], r["commit_interval"], r["p99_ms"]) for r in rows] == [
        ("bridge-eos", 0.1, 180.0), ("kstreams-eos", 0.1, 400.0), ("bridge-eos", 1.0, 1200.0),
    ]  # fmt: skip
    runs = [
        _run("bridge-eos", 0.1, 96.0), _run("bridge-eos", 1.0, 100.0),
        _run("kstreams-eos", 0.1, 30.0), _run("kstreams-eos", 1.0, 60.0),
    ]  # fmt: skip
    goals = {g["what"].split(":")[0]: g["met"] for g in interval_goals(runs, latency, [0.1, 1.0])}
    assert goals == {
        "p1 @0.1s common rate": True,  # 180 ≤ 400
        "p1 @1s 50% of own max": False,  # 1200 > 1150
        "p1 throughput @0.1s / @1s, bridge-eos": True,  # 0.96
        "p1 throughput @0.1s, bridge-eos / kstreams-eos": True,  # 3.2
    }


def test_value_pool_makes_the_bytes_make_value_makes() -> None:
    import random

    from bench.data import ValuePool, make_value

    pool = ValuePool(100_000, random.Random(11), size=8)

    class Drawn(random.Random):  # make_value's rng, answering the pool's amount
        amount = 0.0

        def uniform(self, a: float, b: float) -> float:
            return self.amount

    rng = Drawn()
    for i in (0, 7, 8, 12_345_678):
        rng.amount = pool.amounts[i % 8]
        user = pool.users[i % 8]
        assert pool.value(i, 1_795_859_816_527) == make_value(i, user, rng, 1_795_859_816_527)
        assert pool.key(i) == f"user-{user:06d}".encode()
    with pytest.raises(ValueError, match="power of two"):
        ValuePool(10, random.Random(1), size=6)
