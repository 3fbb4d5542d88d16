"""The benchmark's broker-free parts still run against the current state code (no timings)."""

from __future__ import annotations

from bench.bench_recovery import cache


def test_cache_phase_checkpoints_when_the_cap_is_reached() -> None:
    result = cache(keys=20_000, cap_mb=1)  # 40k updates over 20k keys, ~2.7 MB dirty
    assert result["records"] == 40_000
    assert result["checkpoints"] >= 1  # the 1 MB cap forced at least one early checkpoint
    assert result["peak_rss_mb"] > 0
