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
