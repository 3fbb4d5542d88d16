"""Window arithmetic (pure) and the window step against a brute-force reference."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import ConfigError
from app.pipeline.builder import Pipeline
from app.pipeline.record import Row
from app.pipeline.spec import compile_spec
from app.pipeline.stateful.windows import is_closed, last_closed_start, window, window_starts
from tests.support.state import LocalAccess, row, run

sizes = st.integers(1, 10_000)


@given(st.integers(-(10**12), 10**12), sizes, st.data())
def test_window_starts_are_exactly_the_windows_holding_the_timestamp(
    ts: int, size: int, data: st.DataObject
) -> None:
    hop = data.draw(st.integers(1, size))
    starts = window_starts(ts, size, hop)
    assert starts == sorted(starts)
    assert all(s % hop == 0 and s <= ts < s + size for s in starts)
    # Brute force: every multiple of hop in (ts - size, ts].
    first = (ts - size) // hop * hop
    expected = [s for s in range(first, ts + 1, hop) if s <= ts < s + size]
    assert starts == expected


def test_tumbling_and_hopping_examples() -> None:
    assert window_starts(12_345, 10_000, 10_000) == [10_000]
    assert window_starts(12_345, 10_000, 5_000) == [5_000, 10_000]
    assert window_starts(-1, 10, 10) == [-10]
    assert window_starts(0, 10, 10) == [0]


@given(st.integers(-(10**9), 10**9), sizes, st.integers(0, 5_000), st.data())
def test_last_closed_start(now: int, size: int, grace: int, data: st.DataObject) -> None:
    hop = data.draw(st.integers(1, size))
    last = last_closed_start(now, size, grace, hop)
    assert last % hop == 0
    assert is_closed(last, size, grace, now)
    assert not is_closed(last + hop, size, grace, now)


def reference(
    records: list[tuple[str, int, int]], size: int, hop: int, grace: int
) -> dict[tuple[str, int], int]:
    """Sum per (key, window start) of records that were not late when they arrived, for the
    windows closed by the final stream time."""
    sums: dict[tuple[str, int], int] = defaultdict(int)
    now = None
    for key, ts, amount in records:
        now = ts if now is None else max(now, ts)
        for start in window_starts(ts, size, hop):
            if not is_closed(start, size, grace, now):
                sums[(key, start)] += amount
    assert now is not None
    return {kw: v for kw, v in sums.items() if is_closed(kw[1], size, grace, now)}


records_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 20_000), st.integers(1, 9)),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records_st,
    st.sampled_from([(1000, 1000), (1000, 500), (3000, 1000)]),
    st.integers(0, 1500),
    st.data(),
)
def test_window_step_matches_reference_for_any_batching(
    stores: Callable[[str], LocalAccess],
    records: list[tuple[str, int, int]],
    size_hop: tuple[int, int],
    grace: int,
    data: st.DataObject,
) -> None:
    size, hop = size_hop
    cuts = sorted(data.draw(st.sets(st.integers(1, len(records)), max_size=5)))
    access = stores("w")
    step = window(size / 1000, hop / 1000, grace / 1000, "sum", "amount", "ts")
    rows = [
        row({"ts": ts, "amount": amt}, key=k, offset=i) for i, (k, ts, amt) in enumerate(records)
    ]
    emitted: dict[tuple[str, int], int] = {}
    for lo, hi in zip([0, *cuts], [*cuts, len(records)], strict=True):
        out, ctx = run(step, rows[lo:hi], access)
        assert not ctx.failures
        for r in out:
            window_id = (r.value["key"], r.value["start"])
            assert window_id not in emitted, "a window was emitted twice"
            assert r.value["end"] == r.value["start"] + size
            emitted[window_id] = r.value["value"]
        access.commit()
    assert emitted == reference(records, size, hop, grace)


def test_window_results_carry_their_source(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count")
    out, _ = run(
        step, [row({}, key="k", offset=5, ts=1_000), row({}, key="k", offset=6, ts=25_000)], access
    )
    assert [r.value for r in out] == [
        {"key": "k", "start": 0, "end": 10_000, "value": 1,
         "_source_topic": "in", "_source_partition": 0, "_source_offset": 6},
    ]  # fmt: skip
    assert out[0].key == "k"


def test_aborted_batch_leaves_no_trace(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count")
    run(step, [row({}, key="k", offset=0, ts=1_000)], access)
    access.commit()
    out, _ = run(step, [row({}, key="k", offset=1, ts=30_000)], access)
    assert len(out) == 1
    access.discard()  # the checkpoint with the emitted window aborted: replay it
    out, _ = run(step, [row({}, key="k", offset=1, ts=30_000)], access)
    assert [r.value["value"] for r in out] == [1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"size": 0}, "size > 0"),
        ({"size": 10, "hop": 20}, "hop <= size"),
        ({"size": 10, "grace": -1}, "non-negative"),
        ({"size": 10, "aggregate": "median", "of": "x"}, "not one of"),
        ({"size": 10, "aggregate": "sum"}, "needs a field"),
    ],
)
def test_bad_window_settings_are_config_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        window(**kwargs)  # type: ignore[arg-type]


def test_window_from_spec(tmp_path: Path) -> None:
    spec = {
        "steps": [
            {"key_by": "user"},
            {"window": {"size": 10, "hop": 5, "grace": 1, "timestamp": "ts",
                        "aggregate": {"mean": "amount"}, "name": "avg10s"}},
        ]
    }  # fmt: skip
    pipeline = compile_spec(spec)
    step = pipeline.steps[1]
    assert pipeline.stateful and step.name == "avg10s"
    access = LocalAccess(tmp_path)
    rows = [
        row({"user": "u", "ts": t, "amount": a}) for t, a in ((1_000, 2), (2_000, 4), (40_000, 0))
    ]
    for s in pipeline.steps:
        rows, _ = run(s, rows, access)
    assert [(r.value["start"], r.value["value"]) for r in rows] == [(-5_000, 3.0), (0, 3.0)]


def test_same_partition_of_two_topics_in_one_batch_stays_apart(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count")
    rows = []
    for i in range(6):  # interleaved: a, b, a, b, ... all key "k", all in window [0, 10 s)
        rows.append(Row({}, "k", None, "ab"[i % 2], 0, i, 1_000 + i))
    rows += [Row({}, "k", None, topic, 0, 9, 30_000) for topic in ("a", "b")]  # close them
    out, _ = run(step, rows, access)
    assert sorted((r.value["_source_topic"], r.value["value"]) for r in out) == [
        ("a", 3),
        ("b", 3),
    ]


# ---- several aggregates per window (issue 51, scope 2) ------------------------------------------


def _fields(out: list[Row]) -> list[dict[str, object]]:
    return [{k: v for k, v in r.value.items() if not k.startswith("_")} for r in out]


def test_several_aggregates_come_with_their_count_in_both_forms(tmp_path: Path) -> None:
    spec = compile_spec(
        {
            "steps": [
                {
                    "window": {
                        "size": 10,
                        "timestamp": "ts",
                        "aggregate": {"mean": "amount", "max": "amount"},
                    }
                }
            ]
        }
    )
    listed = compile_spec(
        {
            "steps": [
                {
                    "window": {
                        "size": 10,
                        "timestamp": "ts",
                        "aggregate": ["count", {"mean": "amount"}, {"max": "amount"}],
                    }
                }
            ]
        }
    )
    python = Pipeline().window(10, timestamp="ts").aggregate(mean="amount", max="amount")
    rows = [row({"ts": 1000 * i, "amount": i}, key="k", offset=i) for i in range(25)]
    expected = [
        {"key": "k", "start": 0, "end": 10_000, "count": 10, "mean_amount": 4.5, "max_amount": 9},
        {
            "key": "k",
            "start": 10_000,
            "end": 20_000,
            "count": 10,
            "mean_amount": 14.5,
            "max_amount": 19,
        },
    ]
    for n, pipeline in enumerate((spec, listed, python)):
        out, ctx = run(pipeline.steps[0], rows, LocalAccess(tmp_path / str(n)))
        assert not ctx.failures and _fields(out) == expected


def test_several_aggregates_survive_a_restart_mid_window(tmp_path: Path) -> None:
    step = Pipeline().window(10, timestamp="ts").aggregate(sum="amount", min="amount").steps[0]
    access = LocalAccess(tmp_path)
    first = [row({"ts": 1000 * i, "amount": i}, key="k", offset=i) for i in range(5)]
    run(step, first, access)
    access.commit()
    access = LocalAccess(tmp_path)  # reopened from what was committed
    rest = [row({"ts": 1000 * i, "amount": i}, key="k", offset=i) for i in range(5, 12)]
    out, _ = run(step, rest, access)
    assert _fields(out) == [
        {"key": "k", "start": 0, "end": 10_000, "count": 10, "sum_amount": 45, "min_amount": 0}
    ]


def test_an_overflow_in_one_aggregate_changes_none_of_them(tmp_path: Path) -> None:
    step = Pipeline().window(10, timestamp="ts").aggregate(sum="amount", max="amount").steps[0]
    rows = [
        row({"ts": 1000, "amount": 2**62}, key="k", offset=0),
        row({"ts": 2000, "amount": 2**62}, key="k", offset=1),  # the sum would pass 2**63 - 1
        row({"ts": 3000, "amount": 5}, key="k", offset=2),
        row({"ts": 12_000, "amount": 1}, key="k", offset=3),
    ]
    out, ctx = run(step, rows, LocalAccess(tmp_path))
    assert [(f.row.offset, type(f.error).__name__) for f in ctx.failures] == [
        (1, "AggregateOverflow")
    ]
    assert _fields(out) == [
        {
            "key": "k",
            "start": 0,
            "end": 10_000,
            "count": 2,
            "sum_amount": 2**62 + 5,
            "max_amount": 2**62,
        }
    ]


def test_one_aggregate_keeps_its_value_field() -> None:
    step = compile_spec(
        {"steps": [{"window": {"size": 10, "aggregate": {"sum": "amount"}}}]}
    ).steps[0]
    assert step.aggregate.fields(7) == {"value": 7}  # type: ignore[attr-defined]


def test_an_aggregate_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="'max_amount' is given twice"):
        compile_spec(
            {
                "steps": [
                    {"window": {"size": 10, "aggregate": [{"max": "amount"}, {"max": "amount"}]}}
                ]
            }
        )
