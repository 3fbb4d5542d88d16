"""Event times a window accepts (max_event_time_skew) and late records (issue 32, scope 3).

One record with an event time years ahead must not move its partition's stream time: it is an
``InvalidEventTime`` dead letter and the good records after it count as if it never came. Late
records are counted per step and, with ``late_records=dlq``, dead-lettered as ``LateRecord``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import ConfigError
from app.ops.metrics import LATE_RECORDS, Metrics
from app.pipeline.builder import Pipeline
from app.pipeline.spec import compile_spec
from app.pipeline.stateful.event_time import bounds, iso
from app.pipeline.stateful.windows import is_closed, window, window_starts
from app.pipeline.steps import fuse
from app.serde import formats
from tests.support.state import LocalAccess, row, run

DAY = 86_400_000
NOW = 1_700_000_000_000  # the Kafka timestamp of the test records
YEAR_9999 = 253_402_300_799_000


def failed(ctx: object) -> list[tuple[int, str]]:
    return [(f.row.offset, type(f.error).__name__) for f in ctx.failures]  # type: ignore[attr-defined]


# ---- the bounds (pure) -----------------------------------------------------------------------


WALL = NOW + 10 * DAY  # the bridge's clock in the pure tests


def test_without_stream_time_only_the_future_is_bounded_by_the_bridges_clock() -> None:
    low, high = bounds(None, NOW, DAY, DAY, WALL)
    assert high == WALL + DAY
    assert low < -(2**62)  # a backfill of old events is fine: nothing is late yet


def test_ahead_is_bounded_by_the_wall_clock_and_behind_by_the_earlier_clock() -> None:
    # A backfill: stream time a month behind the Kafka timestamps.
    month_ago = NOW - 30 * DAY
    assert bounds(month_ago, NOW, DAY, 2 * DAY, WALL) == (month_ago - 2 * DAY, WALL + DAY)
    # Kafka timestamps behind event times (a producer setting its own): the stream time rules.
    assert bounds(NOW, month_ago, DAY, DAY, WALL) == (month_ago - DAY, WALL + DAY)
    # A record cannot vouch for itself: its own clock years ahead moves no bound.
    assert bounds(NOW, NOW + 1000 * DAY, DAY, DAY, WALL)[1] == WALL + DAY


def test_a_kafka_timestamp_of_zero_or_less_is_no_clock() -> None:
    assert bounds(None, 0, DAY, DAY, WALL) == (-(2**63), WALL + DAY)
    assert bounds(None, -1, DAY, DAY, WALL) == (-(2**63), WALL + DAY)
    assert bounds(NOW, 0, DAY, 2 * DAY, WALL) == (NOW - 2 * DAY, WALL + DAY)  # stream time alone


@given(
    st.one_of(st.none(), st.integers(-(2**61), 2**61)),
    st.integers(1, 2**61),
    st.integers(1, 2**40),
    st.integers(1, 2**40),
    st.integers(1, 2**61),
)
def test_everything_near_the_clocks_and_not_past_the_wall_is_accepted(
    current: int | None, record_time: int, skew: int, extra: int, wall: int
) -> None:
    low, high = bounds(current, record_time, skew, skew + extra, wall)
    clocks = [record_time] if current is None else [current, record_time]
    for clock in clocks:
        assert low <= clock - skew
    assert high == wall + skew


def test_iso_names_dates_and_survives_the_ones_dates_cannot_hold() -> None:
    assert iso(0) == "1970-01-01T00:00:00.000+00:00"
    assert iso(YEAR_9999).startswith("9999-12-31T23:59:59")
    assert iso(2**62) == f"{2**62} ms"
    assert iso(None) == "none yet"


# ---- the window step -------------------------------------------------------------------------


def test_a_far_future_record_is_a_dead_letter_and_does_not_move_stream_time(
    tmp_path: Path,
) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts")
    rows = [row({"ts": NOW + i * 1000}, key="k", offset=i, ts=NOW + i * 1000) for i in range(30)]
    rows.insert(5, row({"ts": YEAR_9999}, key="k", offset=99, ts=NOW))
    out, ctx = run(step, rows, access)
    assert failed(ctx) == [(99, "InvalidEventTime")]
    message = str(ctx.failures[0].error)
    assert "in[0]@99" in message and "9999-12-31" in message
    assert "max_event_time_skew" in message
    # Windows of 10 s over 30 records one second apart: [0,10) and [10,20) closed, all counted.
    assert [r.value["value"] for r in out] == [10, 10]


def test_the_first_record_of_a_partition_is_bounded_by_the_bridges_clock(
    tmp_path: Path,
) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts")
    rows = [row({"ts": YEAR_9999}, key="k", offset=0, ts=NOW)]
    rows += [row({"ts": NOW + i * 1000}, key="k", offset=i, ts=NOW) for i in range(1, 25)]
    out, ctx = run(step, rows, access)
    assert failed(ctx) == [(0, "InvalidEventTime")]
    assert [r.value["value"] for r in out] == [9, 10]  # [NOW, NOW + 10 s) holds offsets 1-9


def test_a_window_on_kafka_timestamps_checks_them_against_the_bridges_clock(
    tmp_path: Path,
) -> None:
    """No second clock in the record: a topic that lets a year-9999 timestamp in (a raised
    message.timestamp.after.max.ms) must not close every window of the partition."""
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", name="on-kafka-time")
    minute_ago = (int(time.time() * 1000) - 60_000) // 10_000 * 10_000  # a window's start
    rows = [row({}, key="k", offset=0, ts=YEAR_9999)]  # first: checked against the clock
    rows += [row({}, key="k", offset=i, ts=minute_ago + i * 1000) for i in range(1, 4)]
    rows.append(row({}, key="k", offset=9, ts=YEAR_9999))  # later: the same
    rows.append(row({}, key="k", offset=10, ts=minute_ago + 30_000))
    out, ctx = run(step, rows, access)
    assert failed(ctx) == [(0, "InvalidEventTime"), (9, "InvalidEventTime")]
    assert "the bridge's clock" in str(ctx.failures[0].error)
    assert [r.value["value"] for r in out] == [3]  # offsets 1-3 in one window, none lost


def test_a_pause_of_days_does_not_make_the_records_after_it_invalid(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts")
    later = NOW + 5 * DAY  # the partition was idle for five days: the Kafka timestamps say so
    rows = [row({"ts": NOW}, key="k", offset=0, ts=NOW)]
    rows += [row({"ts": later + i}, key="k", offset=i, ts=later + i) for i in range(1, 4)]
    out, ctx = run(step, rows, access)
    assert not ctx.failures
    assert [(r.value["start"], r.value["value"]) for r in out] == [(NOW - NOW % 10_000, 1)]


def test_an_event_time_far_behind_both_clocks_is_invalid_not_late(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts")
    rows = [
        row({"ts": NOW}, key="k", offset=0, ts=NOW),
        row({"ts": 0}, key="k", offset=1, ts=NOW),  # a broken time: 1970
        row({"ts": NOW - 60_000}, key="k", offset=2, ts=NOW),  # a minute late: only late
    ]
    before = LATE_RECORDS["window"]
    _, ctx = run(step, rows, access)
    assert failed(ctx) == [(1, "InvalidEventTime")]
    assert "behind" in str(ctx.failures[0].error)
    assert LATE_RECORDS["window"] - before == 1


def test_a_window_longer_than_the_skew_still_takes_records_it_can_count(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    week = 7 * 86_400
    step = window(week, aggregate="count", timestamp="ts", max_event_time_skew=3600)
    start = NOW - NOW % (week * 1000)
    kafka_ts = start + 3 * DAY
    step.clock = lambda: kafka_ts / 1000  # the bridge's clock now
    rows = [
        row({"ts": start + 3 * DAY}, key="k", offset=0, ts=kafka_ts),
        row({"ts": start + DAY}, key="k", offset=1, ts=kafka_ts),  # two days behind: counted
        row({"ts": start + 3 * DAY + 2 * 3_600_000}, key="k", offset=2, ts=kafka_ts),  # 2 h ahead
    ]
    _, ctx = run(step, rows, access)
    assert failed(ctx) == [(2, "InvalidEventTime")]


@pytest.mark.parametrize("late_records", ["drop", "dlq"])
def test_late_records_are_counted_per_step_and_dead_lettered_on_request(
    tmp_path: Path, late_records: str
) -> None:
    access = LocalAccess(tmp_path)
    name = f"late-{late_records}"
    step = window(10, grace=2, aggregate="count", timestamp="ts", name=name,
                  late_records=late_records)  # fmt: skip
    rows = [
        row({"ts": 1_000}, key="k", offset=0),
        row({"ts": 25_000}, key="k", offset=1),  # closes [0, 10 s) (10 s + 2 s grace)
        row({"ts": 9_000}, key="k", offset=2),  # late for [0, 10 s)
        row({"ts": 14_000}, key="k", offset=3),  # [10 s, 20 s) open until 22 s: late too
        row({"ts": 21_000}, key="k", offset=4),  # [20 s, 30 s): on time
    ]
    before = LATE_RECORDS[name]
    out, ctx = run(step, rows, access)
    assert [r.value["value"] for r in out] == [1]
    assert LATE_RECORDS[name] - before == 2
    if late_records == "drop":
        assert not ctx.failures
    else:
        assert failed(ctx) == [(2, "LateRecord"), (3, "LateRecord")]
        assert "in[0]@2" in str(ctx.failures[0].error)
        assert "late_records=dlq" in str(ctx.failures[0].error)


def test_a_hopping_record_late_for_some_of_its_windows_only_is_not_late(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, hop=5, aggregate="count", timestamp="ts", name="hop-late")
    rows = [row({"ts": 1_000}, key="k", offset=0), row({"ts": 12_000}, key="k", offset=1)]
    rows.append(row({"ts": 8_000}, key="k", offset=2))  # [0,10) closed, [5,15) still open
    before = LATE_RECORDS["hop-late"]
    _, ctx = run(step, rows, access)
    assert not ctx.failures
    assert LATE_RECORDS["hop-late"] == before


def test_the_metric_exports_the_tally_per_step(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts", name="metered")
    run(step, [row({"ts": 30_000}, key="k"), row({"ts": 1_000}, key="k", offset=1)], access)
    value = Metrics().registry.get_sample_value(
        "eos_bridge_late_records_total", {"step": "metered"}
    )
    assert value == LATE_RECORDS["metered"] >= 1


def reference(
    records: list[tuple[str, int]], size: int, hop: int, grace: int
) -> tuple[dict[tuple[str, int], int], int]:
    """Counts per (key, window) of the closed windows, and how many records were late, of the
    records alone (no invalid ones among them)."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    now, late = None, 0
    for key, ts in records:
        now = ts if now is None else max(now, ts)
        starts = [s for s in window_starts(ts, size, hop) if not is_closed(s, size, grace, now)]
        late += not starts
        for start in starts:
            counts[(key, start)] += 1
    assert now is not None
    return {kw: v for kw, v in counts.items() if is_closed(kw[1], size, grace, now)}, late


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 20_000)), min_size=1, max_size=50),
    st.sets(st.integers(1, 50), max_size=4),
    st.sampled_from([(1000, 1000), (3000, 1000)]),
    st.data(),
)
def test_far_off_records_change_nothing_for_any_batching(
    stores: Callable[[str], LocalAccess],
    records: list[tuple[str, int]],
    bad_at: set[int],
    size_hop: tuple[int, int],
    data: st.DataObject,
) -> None:
    size, hop = size_hop
    step = window(size / 1000, hop / 1000, 0.5, "count", timestamp="ts", name="prop",
                  max_event_time_skew=3600)  # fmt: skip
    rows = [row({"ts": ts}, key=k, offset=i, ts=20_000) for i, (k, ts) in enumerate(records)]
    # Far ahead or far behind, anywhere after the first record (before it, the partition has
    # no clock that an old record could be far behind).
    for n, at in enumerate(sorted(bad_at)):
        bad = YEAR_9999 if n % 2 == 0 else -(10**12)
        rows.insert(min(at, len(rows)), row({"ts": bad}, key="a", offset=1000 + n, ts=20_000))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(rows)), max_size=4)))
    access = stores("w")
    emitted: dict[tuple[str, int], int] = {}
    invalid: list[int] = []
    before = LATE_RECORDS["prop"]
    for lo, hi in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        out, ctx = run(step, rows[lo:hi], access)
        invalid += [f.row.offset for f in ctx.failures]
        emitted |= {(r.value["key"], r.value["start"]): r.value["value"] for r in out}
        access.commit()
    expected, late = reference(records, size, hop, 500)
    assert sorted(invalid) == [1000 + n for n in range(len(bad_at))]
    assert emitted == expected
    assert LATE_RECORDS["prop"] - before == late


# ---- both forms, settings, no fused path -------------------------------------------------------


def test_the_spec_takes_both_settings(tmp_path: Path) -> None:
    spec = {"steps": [{"window": {"size": 10, "timestamp": "ts", "max_event_time_skew": 60,
                                  "late_records": "dlq", "name": "w"}}]}  # fmt: skip
    python = Pipeline().window(10, timestamp="ts", name="w", max_event_time_skew=60,
                               late_records="dlq").aggregate("count")  # fmt: skip
    for step in (compile_spec(spec).steps[0], python.steps[0]):
        assert (step.max_skew, step.late, step.name) == (60_000, "dlq", "w")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"late_records": "keep"}, r"late_records must be one of drop, dlq, got 'keep'"),
        ({"max_event_time_skew": 0}, "max_event_time_skew must be positive"),
        ({"max_event_time_skew": -1}, "max_event_time_skew must be a non-negative number"),
    ],
)
def test_bad_settings_name_the_step_and_the_setting(options: dict[str, object], match: str) -> None:
    spec = {"steps": [{"window": {"size": 10, **options}}]}
    with pytest.raises(ConfigError, match=match) as caught:
        compile_spec(spec)
    assert "steps[0].window" in str(caught.value)


def test_windowed_pipelines_never_take_a_fused_path(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    alone = Pipeline().window(10).aggregate("count")
    after_filter = compile_spec({"steps": [{"filter": "amount > 0"}, {"window": {"size": 10}}]})
    for pipeline in (alone, after_filter):
        assert fuse(pipeline.steps, formats(), 1_000_000, lambda _t: True, access) is None


# ---- the clock rule: a record cannot vouch for itself (issue 51, scope 3) --------------------


def test_a_record_with_both_clocks_years_ahead_is_a_dead_letter(tmp_path: Path) -> None:
    """Before, the record's own Kafka timestamp was the second clock: with both years ahead it
    vouched for itself, stream time jumped and every good record after it was late."""
    access = LocalAccess(tmp_path)
    wall = NOW + 30 * DAY
    step = window(10, aggregate="count", timestamp="ts", name="both-ahead")
    step.clock = lambda: wall / 1000
    future = NOW + 3 * 365 * DAY
    rows = [row({"ts": NOW + i * 1000}, key="k", offset=i, ts=NOW + i * 1000) for i in range(30)]
    rows.insert(5, row({"ts": future}, key="k", offset=99, ts=future))
    before = LATE_RECORDS["both-ahead"]
    out, ctx = run(step, rows, access)
    assert failed(ctx) == [(99, "InvalidEventTime")]
    assert "ahead of the bridge's clock" in str(ctx.failures[0].error)
    assert [r.value["value"] for r in out] == [10, 10]  # every good record in its window
    assert LATE_RECORDS["both-ahead"] == before  # and none late


def test_a_kafka_timestamp_ahead_of_the_wall_clock_is_a_dead_letter_too(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts", max_event_time_skew=60)
    step.clock = lambda: NOW / 1000
    rows = [
        row({"ts": NOW - 5_000}, key="k", offset=0, ts=NOW),
        row({"ts": NOW - 4_000}, key="k", offset=1, ts=NOW + 61_000),  # 61 s ahead: refused
        row({"ts": NOW - 3_000}, key="k", offset=2, ts=NOW + 60_000),  # 60 s: within
    ]
    _, ctx = run(step, rows, access)
    assert failed(ctx) == [(1, "InvalidEventTime")]
    assert "record timestamp" in str(ctx.failures[0].error)


def test_history_far_behind_the_wall_clock_is_processed_as_before(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    step = window(10, aggregate="count", timestamp="ts", name="history")
    step.clock = lambda: (NOW + 400 * DAY) / 1000  # a replay of last year's events
    rows = [row({"ts": NOW + i * 1000}, key="k", offset=i, ts=NOW + i) for i in range(25)]
    out, ctx = run(step, rows, access)
    assert not ctx.failures
    assert [r.value["value"] for r in out] == [10, 10]


def test_the_late_records_of_a_committed_checkpoint_are_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from app.ops.late import LATE_LOG

    access = LocalAccess(tmp_path)
    step = window(10, grace=2, aggregate="count", timestamp="ts", name="late-log")
    late = [row({"ts": 25_000}, key="k", offset=0), row({"ts": 1_000}, key="k", offset=1)]
    LATE_LOG.discard()
    run(step, late, access)
    LATE_LOG.discard()  # an aborted transaction: nothing to say
    assert LATE_LOG.flush() is None
    run(
        step, [row({"ts": 2_000}, key="k", offset=2), row({"ts": 3_000}, key="k", offset=3)], access
    )
    with caplog.at_level("WARNING"):
        line = LATE_LOG.flush()
    assert line is not None and line in caplog.text
    assert "dropped 2 late record(s) in this checkpoint: window 'late-log' 2 (grace 2 s" in line
    assert "first in[0]@2: event time 2000" in line
    assert LATE_LOG.flush() is None  # said once
