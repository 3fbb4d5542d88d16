"""The broker-free P2 state cost probe runs against the current state code (no timings)."""

from __future__ import annotations

from bench.state_cost import run


def test_one_line_per_segment_with_every_cost() -> None:
    segments = run(records=20_000, keys=1_000, checkpoint=4_000, segment=10_000)
    assert [s["records"] for s in segments] == [10_000, 20_000]
    assert all(set(s) == {"records", "process", "step", "checkpoint"} for s in segments)
