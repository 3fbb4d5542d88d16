"""The PromQL name extractor the ops-kit checks rely on (tests/support/promql.py)."""

from __future__ import annotations

from tests.support.promql import exported_names, metric_names


def test_names_among_functions_matchers_ranges_and_grouping() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{job="x", le!="+Inf"}'
        "[$__rate_interval]))) / on (job, instance) group_left (pod) b_total offset 5m"
        ' > 1e3 and time() - c_timestamp_seconds{step="sum(d)"} unless bool max_over_time(e[1h:5m])'
    )
    assert metric_names(expr) == {"a_seconds_bucket", "b_total", "c_timestamp_seconds", "e"}


def test_a_bare_selector_is_a_name() -> None:
    assert metric_names("eos_bridge_ready == 0") == {"eos_bridge_ready"}


def test_exported_names_include_declared_families_without_samples() -> None:
    text = (
        "# HELP x_total c\n# TYPE x_total counter\n# TYPE y counter\n"
        '# TYPE h histogram\nh_bucket{le="1"} 0\n'
        '# TYPE g gauge\ng{a="b"} 1\n'
    )
    assert exported_names(text) == {"x_total", "y_total", "h_bucket", "h_sum", "h_count", "g"}
