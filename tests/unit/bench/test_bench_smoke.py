"""The benchmark's broker-free parts still run against the current state code (no timings)."""

from __future__ import annotations

from bench.bench_recovery import cache


def test_cache_phase_checkpoints_when_the_cap_is_reached() -> None:
    result = cache(keys=20_000, cap_mb=1)  # 40k updates over 20k keys, ~2.7 MB dirty
    assert result["records"] == 40_000
    assert result["checkpoints"] >= 1  # the 1 MB cap forced at least one early checkpoint
    assert result["peak_rss_mb"] > 0


def test_a_ratio_over_a_zero_denominator_is_left_out() -> None:
    """Tiny runs can measure 0 CPU seconds for a contender; the report must still render."""
    from bench.report import _ratios

    runs = [
        {"rep": 1, "contender": "a", "cpu_s_per_m": 2.0},
        {"rep": 1, "contender": "b", "cpu_s_per_m": 0.0},
        {"rep": 2, "contender": "a", "cpu_s_per_m": 3.0},
        {"rep": 2, "contender": "b", "cpu_s_per_m": 1.5},
    ]
    assert _ratios(runs, "a", "b", "cpu_s_per_m") == [2.0]


class _Probe:
    """Appended counts as a contender's output would show them, one per poll."""

    output_partitions = 4

    def __init__(self, appended: list[int], final: int) -> None:
        self._appended, self.final = iter(appended), final

    def appended(self) -> int:
        return next(self._appended, self.final)

    def caught_up(self) -> bool:
        return False


class _Proc:
    def __init__(self) -> None:
        self.cpu = 0.0

    def cpu_seconds(self) -> float:
        self.cpu += 0.5
        return self.cpu


def _polled(appended: list[int], final: int) -> tuple[float, float]:
    from bench.throughput import _Appends

    probe = _Probe(appended, final)
    appends = _Appends(_Proc(), probe)  # type: ignore[arg-type]
    for _ in appended:
        appends.caught_up()
    return appends.last_output(done_t=-1.0, done_cpu=-1.0)


def test_the_run_ends_at_the_last_output_record_not_at_the_next_commit() -> None:
    """An exactly-once run: 100 records, then idle polls until the commit that appends one
    marker per partition (4); the end point is the poll that first saw all 100 records."""
    _, cpu = _polled([10, 50, 99, 100, 100, 100], final=104)
    assert cpu == 2.0  # the 4th poll (CPU read at polls 1..4: 0.5, 1.0, 1.5, 2.0)


def test_output_appended_after_the_group_caught_up_keeps_the_commit_as_the_end() -> None:
    assert _polled([10, 50], final=500) == (-1.0, -1.0)


def test_a_contenders_commit_intervals_run_back_to_back_in_alternating_order() -> None:
    """Issue 34's 0.1 s / 1 s ratio compares adjacent runs of one contender: a repetition that
    ran every 0.1 s run and then every 1 s run let the machine's load shift between them."""
    from bench.cli import schedule
    from bench.contenders import BY_KEY

    a, b = BY_KEY["bridge-eos"], BY_KEY["kstreams-eos"]
    even = schedule(["p1", "p2"], [a, b], [1.0, 0.1], rep=0)
    odd = schedule(["p1", "p2"], [a, b], [1.0, 0.1], rep=1)
    assert [(p, c.key, i) for p, c, i in even] == [
        ("p1", "bridge-eos", 0.1), ("p1", "bridge-eos", 1.0),
        ("p1", "kstreams-eos", 0.1), ("p1", "kstreams-eos", 1.0),
        ("p2", "bridge-eos", 0.1), ("p2", "bridge-eos", 1.0),
        ("p2", "kstreams-eos", 0.1), ("p2", "kstreams-eos", 1.0),
    ]  # fmt: skip
    assert [(p, c.key, i) for p, c, i in odd][:4] == [
        ("p1", "kstreams-eos", 1.0), ("p1", "kstreams-eos", 0.1),
        ("p1", "bridge-eos", 1.0), ("p1", "bridge-eos", 0.1),
    ]  # fmt: skip
