"""Aggregates never store what they cannot hold: the record that would overflow a sum, count or
window aggregate is dead-lettered (AggregateOverflow) and the stored value stays as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.errors import ConfigError
from app.pipeline.errors import INT64_MAX, INT64_MIN
from app.pipeline.stateful import Count, Sum, window
from app.pipeline.stateful.kit import event_time, out_of_range
from app.pipeline.steps import StepContext
from app.state.keys import encode_key
from tests.support.state import LocalAccess, row, run


def failed(ctx: StepContext) -> list[tuple[int, str]]:
    return [(f.row.offset, type(f.error).__name__) for f in ctx.failures]


def test_range_rule() -> None:
    for fine in (0, INT64_MAX, INT64_MIN, 1e300, -1e300, 0.5):
        assert not out_of_range(fine)
    for bad in (INT64_MAX + 1, INT64_MIN - 1, 2**64, float("inf"), float("-inf"), float("nan")):
        assert out_of_range(bad)


@pytest.mark.parametrize(
    ("amounts", "sums"),
    [
        ([2**62, 2**62, 1], [2**62, 2**62 + 1]),  # 2**63 is one past signed 64 bits
        ([-(2**63), -1, 5], [-(2**63), -(2**63) + 5]),
        ([1e308, 1e308, 1.0], [1e308, 1e308 + 1.0]),  # the float sum would be inf
        ([1, float("nan"), 2], [1, 3]),  # NaN from an expression such as float('nan')
        ([1, 10**30, 2], [1, 3]),  # int(amount * 100) of a huge amount
    ],
)
def test_sum_dead_letters_the_overflowing_record_and_keeps_going(
    tmp_path: Path, amounts: list[Any], sums: list[Any]
) -> None:
    access = LocalAccess(tmp_path)
    rows = [row({"n": a}, key="k", offset=i) for i, a in enumerate(amounts)]
    out, ctx = run(Sum("n"), rows, access)
    assert [r.value["sum"] for r in out] == sums
    assert failed(ctx) == [(1, "AggregateOverflow")]
    assert "stored value is unchanged" in str(ctx.failures[0].error)
    access.commit()
    assert access.partition("sum", "in", 0).get(encode_key("k")) not in (b"null", None)


def test_a_null_sum_left_by_an_old_version_dead_letters_instead_of_crashing(
    tmp_path: Path,
) -> None:
    access = LocalAccess(tmp_path)
    access.partition("sum", "in", 0).set(encode_key("k"), b"null")
    out, ctx = run(Sum("n"), [row({"n": 1}, key="k"), row({"n": 1}, key="j", offset=1)], access)
    assert [r.value["key"] for r in out] == ["j"]
    assert failed(ctx) == [(0, "AggregateOverflow")]
    assert "null" in str(ctx.failures[0].error)


def test_count_stops_at_signed_64_bits(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    access.partition("count", "in", 0).set(encode_key("k"), b"%d" % (INT64_MAX - 1))
    out, ctx = run(Count(), [row({}, key="k", offset=i) for i in range(3)], access)
    assert [r.value["count"] for r in out] == [INT64_MAX]
    assert failed(ctx) == [(1, "AggregateOverflow"), (2, "AggregateOverflow")]


def test_window_sum_overflow_changes_no_window_and_no_stream_time(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    hopping = window(10, hop=5, aggregate="sum", of="n", timestamp="ts")
    rows = [
        row({"n": 2**62, "ts": 6_000}, key="k", offset=0),  # windows [0, 10 s), [5 s, 15 s)
        row({"n": 2**62, "ts": 11_000}, key="k", offset=1),  # [5, 15) overflows, [10, 20) not
        row({"n": 2**63, "ts": 90_000}, key="k", offset=2),  # overflows fresh windows
        row({"n": 1, "ts": 11_500}, key="k", offset=3),  # not late: 90 s never became time
        row({"n": 0, "ts": 200_000}, key="k", offset=4),  # closes all of the above
    ]
    out, ctx = run(hopping, rows, access)
    assert failed(ctx) == [(1, "AggregateOverflow"), (2, "AggregateOverflow")]
    results = {(r.value["start"], r.value["value"]) for r in out}
    assert results == {(0, 2**62), (5_000, 2**62 + 1), (10_000, 1)}


@pytest.mark.parametrize("ts", [1e30, float("nan"), float("inf"), "soon", True, -(2**63)])
def test_unusable_event_times_are_dead_lettered(tmp_path: Path, ts: Any) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts")
    _, ctx = run(step, [row({"ts": ts}, key="k"), row({"ts": 1}, key="k", offset=1)], access)
    assert failed(ctx) == [(0, "InvalidEventTime")]
    assert event_time(2**62) == 2**62


def test_times_beyond_2_to_the_62_ms_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="at most 2\\*\\*62 ms"):
        window(1e30)
