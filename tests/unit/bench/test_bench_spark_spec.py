"""bench.spark_spec's pairs and medians, without Spark (its runs: bench/results/issue31-*)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.spark_spec import PAIRS, jobs_of, summarise


def _run(job: str, rate: int) -> dict[str, Any]:
    return {"job": job, "records_per_s": rate, "query_records_per_s": rate * 2}


def test_each_pair_compares_its_own_two_jobs_and_the_first_pair_is_the_headline() -> None:
    runs = [
        *(_run("spec", r) for r in (90, 100, 80)),
        *(_run("hand-written", r) for r in (100, 100, 120)),
        *(_run("spec-no-bad", r) for r in (190, 200)),
        *(_run("hand-no-bad", r) for r in (200, 200)),
    ]
    summary = summarise(runs)
    assert summary["pairs"]["equal-work"]["medians_records_per_s"] == {
        "spec": 90,
        "hand-written": 100,
    }
    assert summary["overhead"] == pytest.approx(0.10)
    assert summary["query_overhead"] == pytest.approx(0.10)
    assert summary["pairs"]["aggregates-only"]["overhead"] == pytest.approx(0.025)


def test_a_pair_not_run_is_left_out() -> None:
    runs = [_run("spec-no-bad", 95), _run("hand-no-bad", 100)]
    assert list(summarise(runs)["pairs"]) == ["aggregates-only"]
    assert summarise(runs)["overhead"] == pytest.approx(0.05)


def test_pairs_name_their_jobs_in_run_order() -> None:
    assert jobs_of("equal-work") == ["spec", "hand-written"]
    assert jobs_of(",".join(PAIRS)) == ["spec", "hand-written", "spec-no-bad", "hand-no-bad"]
    with pytest.raises(ValueError, match="--pairs: everything; known: equal-work"):
        jobs_of("everything")
