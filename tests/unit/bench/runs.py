"""A throughput run's entry as ``bench.report`` reads it, for the report tests."""

from __future__ import annotations


def run(contender: str, rep: int, rate: float, pipeline: str = "p1") -> dict[str, object]:
    """One run of ``contender`` at ``rate`` records/s, everything else 1."""
    return {
        "pipeline": pipeline, "contender": contender, "rep": rep, "records_per_s": rate,
        "committed_records_per_s": rate, "cpu_s_per_million": 1.0, "peak_rss_mb": 1.0,
        "startup_s": 1.0, "outputs": 1,
    }  # fmt: skip
