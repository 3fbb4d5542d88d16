"""Comparing the job's table with the plain-Python reference."""

from __future__ import annotations

import math

from tests.spark.reference import WindowKey, WindowStats


def assert_same_aggregates(
    table: dict[WindowKey, WindowStats], reference: dict[WindowKey, WindowStats], rsd: float
) -> None:
    """Same (key, window) rows; counts, sums and percentiles exact; distincts within HLL error.

    ``approx_count_distinct`` is a HyperLogLog++ estimate: allowed error is 3 standard
    deviations (``3 * rsd * exact``), at least 1.
    """
    assert sorted(table) == sorted(reference), "the (key, window) rows differ"
    for group, want in reference.items():
        got = table[group]
        exact = (got.record_count, got.amount_sum, got.amount_p50, got.amount_p95, got.amount_p99)
        assert exact == (
            want.record_count,
            want.amount_sum,
            want.amount_p50,
            want.amount_p95,
            want.amount_p99,
        ), f"{group}: {got} != {want}"
        allowed = max(1, math.ceil(3 * rsd * want.distinct_ids))
        assert abs(got.distinct_ids - want.distinct_ids) <= allowed, f"{group}: {got} != {want}"
