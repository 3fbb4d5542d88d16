"""Dedupe, count and sum on real RocksDB stores (no Kafka), from Python and from specs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import ConfigError
from app.pipeline import Pipeline
from app.pipeline.spec import compile_spec
from app.pipeline.stateful import Count, Dedupe, Sum
from app.state.factory import pipeline_stores
from tests.support.state import LocalAccess, row, run


def test_count_per_key_with_provenance(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    rows = [row({}, key=k, offset=i) for i, k in enumerate([b"a", b"b", b"a"])]
    out, _ = run(Count(), rows, access)
    assert [(r.value["key"], r.value["count"], r.value["_source_offset"]) for r in out] == [
        ("a", 1, 0), ("b", 1, 1), ("a", 2, 2),
    ]  # fmt: skip
    assert out[0].value["_source_topic"] == "in" and out[0].value["_source_partition"] == 0


def test_count_survives_reopen_only_when_committed(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    run(Count(), [row({}, key="k")], access)
    access.commit()
    run(Count(), [row({}, key="k")], access)  # uncommitted
    access.close()
    out, _ = run(Count(), [row({}, key="k")], LocalAccess(tmp_path))
    assert out[0].value["count"] == 2


def test_stores_of_a_property_test_start_empty_for_each_example(
    stores: Callable[[str], LocalAccess],
) -> None:
    """The ``stores`` fixture empties committed and uncommitted state between examples."""
    for _ in range(2):
        access = stores("c")
        out, _ = run(Count(), [row({}, key="k"), row({}, key="j", partition=1)], access)
        assert [r.value["count"] for r in out] == [1, 1]
        access.commit()
        run(Count(), [row({}, key="k")], access)  # uncommitted


def test_partitions_are_separate_state(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    out, _ = run(Count(), [row({}, key="k", partition=0), row({}, key="k", partition=1)], access)
    assert [r.value["count"] for r in out] == [1, 1]


def test_sum_and_bad_values_fail_only_their_record(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    rows = [row({"n": 2}, key="k"), row({"n": "x"}, key="k"), row({"n": 1.5}, key="k")]
    out, ctx = run(Sum("n"), rows, access)
    assert [r.value["sum"] for r in out] == [2, 3.5]
    assert [f.row.value for f in ctx.failures] == [{"n": "x"}]
    assert "must be a number" in str(ctx.failures[0].error)


MINUTE = 60_000


def test_dedupe_with_a_ttl_refuses_a_record_timestamp_ahead_of_the_bridges_clock(
    tmp_path: Path,
) -> None:
    """One record 50 minutes ahead (inside Kafka 4's default message.timestamp.after.max.ms)
    with ttl 600 s made the dedupe forget every id: every repeat passed."""
    access = LocalAccess(tmp_path)
    wall = 1_800_000_000_000
    step = Dedupe(ttl=600, by="id", clock=lambda: wall / 1000)
    ids = [("a", 0), ("b", 1), ("x", 50), ("a", 2), ("b", 3), ("c", 4)]  # minutes from the wall
    rows = [row({"id": i}, offset=n, ts=wall + m * MINUTE) for n, (i, m) in enumerate(ids)]
    out, ctx = run(step, rows, access)
    assert [r.value["id"] for r in out] == ["a", "b", "c"]  # every repeat dropped
    assert [(f.row.offset, type(f.error).__name__) for f in ctx.failures] == [
        (2, "InvalidEventTime")
    ]
    message = str(ctx.failures[0].error)
    assert "max_event_time_skew (600 s) of dedupe 'dedupe' ahead of the bridge's clock" in message


def test_dedupe_skew_defaults_to_the_ttl_up_to_a_day_and_can_be_set() -> None:
    assert Dedupe(ttl=600)._skew_ms == 600_000
    assert Dedupe(ttl=7 * 86_400)._skew_ms == 86_400_000
    assert Dedupe()._skew_ms is None  # no ttl: no clock to protect
    assert Dedupe(ttl=600, max_event_time_skew=30)._skew_ms == 30_000
    spec = compile_spec({"steps": [{"dedupe": {"ttl": 600, "max_event_time_skew": 5}}]})
    assert spec.steps[0]._skew_ms == 5_000  # type: ignore[attr-defined]
    python = Pipeline().dedupe(ttl=600, max_event_time_skew=5)
    assert python.steps[0]._skew_ms == 5_000  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="max_event_time_skew must be positive"):
        Dedupe(ttl=600, max_event_time_skew=0)


def test_dedupe_replays_history_far_behind_the_wall_clock(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = Dedupe(ttl=10, by="id")  # the real clock: these times are in 1970
    ids_ts = [("a", 0), ("a", 9_999), ("a", 10_000)]
    out, ctx = run(step, [row({"id": i}, ts=t) for i, t in ids_ts], access)
    assert not ctx.failures and [r.timestamp for r in out] == [0, 10_000]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from("abcde"), min_size=1, max_size=80), st.data())
def test_count_equals_a_counter_for_any_batching_with_aborts(
    stores: Callable[[str], LocalAccess], keys: list[str], data: st.DataObject
) -> None:
    """Batches commit or abort at random; aborted batches are replayed (like the loop does)."""
    access = stores("c")
    i, last = 0, {}
    while i < len(keys):
        n = data.draw(st.integers(1, 10))
        out, _ = run(
            Count(), [row({}, key=k, offset=i + j) for j, k in enumerate(keys[i : i + n])], access
        )
        if data.draw(st.booleans()):
            access.discard()
            continue
        access.commit()
        last.update({r.value["key"]: r.value["count"] for r in out})
        i += n
    assert last == dict(Counter(keys))


def test_dedupe_by_field_passes_each_id_once(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    rows = [row({"id": i}, ts=t) for i, t in ((1, 0), (2, 1), (1, 2), (3, 3), (2, 4))]
    out, _ = run(Dedupe(by="id"), rows, access)
    assert [r.value["id"] for r in out] == [1, 2, 3]


def test_dedupe_ttl_on_stream_time(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = Dedupe(ttl=10, by="id")
    ids_ts = [("a", 0), ("a", 9_999), ("a", 10_000), ("a", 5_000), ("a", 19_999), ("a", 20_000)]
    out, _ = run(step, [row({"id": i}, ts=t) for i, t in ids_ts], access)
    # seen at 0 → repeats until stream time 10 000; re-seen at 10 000 → until 20 000.
    assert [r.timestamp for r in out] == [0, 10_000, 20_000]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40_000)), min_size=1, max_size=60),
    st.integers(1, 20),
    st.data(),
)
def test_dedupe_outcome_does_not_depend_on_batching_or_sweeps(
    stores: Callable[[str], LocalAccess],
    records: list[tuple[int, int]],
    ttl_s: int,
    data: st.DataObject,
) -> None:
    ttl = ttl_s * 1000
    expected, seen, now = [], {}, -1
    for i, (ident, ts) in enumerate(records):  # reference: no sweeping, one record at a time
        now = max(now, ts)
        if ident in seen and seen[ident] + ttl > now:
            continue
        seen[ident] = now
        expected.append(i)
    access = stores("d")
    rows = [row({"id": ident}, offset=i, ts=ts) for i, (ident, ts) in enumerate(records)]
    cuts = sorted(data.draw(st.sets(st.integers(1, len(rows)), max_size=6)))
    passed = []
    for lo, hi in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        out, _ = run(Dedupe(ttl=ttl_s, by="id"), rows[lo:hi], access)
        passed += [r.offset for r in out]
        access.commit()
    assert passed == expected


def test_dedupe_sweeps_expired_ids(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    rows = [row({"id": i}, ts=i * 1000) for i in range(100)]
    run(Dedupe(ttl=5, by="id"), rows, access)
    access.commit()
    state = access.states[("dedupe", "in", 0)]
    live_ids = [k for k, _ in state.scan(b"d", b"e")]
    assert 5 <= len(live_ids) <= 20, "expired ids stay in state"


def test_spec_compiles_stateful_steps() -> None:
    pipeline = compile_spec(
        {
            "steps": [
                {"dedupe": {"by": "id", "ttl": 3600, "name": "seen"}},
                {"key_by": "user"},
                {"count": None},
                {"sum": "amount"},
            ]
        }
    )
    assert pipeline.stateful
    assert pipeline_stores(pipeline) == ["seen", "count", "sum"]


@pytest.mark.parametrize(
    ("step", "match"),
    [
        ({"dedupe": {"ttl": 0}}, "ttl must be positive"),
        ({"dedupe": {"ttl": "1h"}}, "seconds"),
        ({"dedupe": {"bye": "id"}}, "unknown option"),
        ({"sum": {"name": "s"}}, "'field'"),
        ({"window": {"hop": 1}}, "size is required"),
        ({"count": {"name": "a b"}}, None),
    ],
)
def test_spec_errors_name_the_step(step: dict[str, object], match: str | None) -> None:
    with pytest.raises(ConfigError, match=match or "store name") as info:
        pipeline_stores(compile_spec({"steps": [step]}))
    assert "steps[0]" in str(info.value) or "step 0" in str(info.value)


def test_duplicate_store_names_are_refused() -> None:
    pipeline = Pipeline().count().count()
    with pytest.raises(ConfigError, match="store name 'count' is used by another"):
        pipeline_stores(pipeline)


def test_builder_methods() -> None:
    p = (
        Pipeline()
        .dedupe(by="id", ttl=60)
        .count(name="c")
        .sum("amount")
        .window(60, hop=30, grace=5, timestamp="ts")
        .aggregate("max", of="amount")
    )
    assert [s.name for s in p.steps] == ["dedupe", "c", "sum", "window"]
    assert pipeline_stores(p) == ["dedupe", "c", "sum", "window"]
