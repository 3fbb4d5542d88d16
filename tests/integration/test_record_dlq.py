"""Every per-record failure is a dead letter with its own error class, in the same
transaction, without an exit, an abort or a flood of log lines (issue 12, acceptance 1, 2, 5).

The bridge runs as a subprocess against the session broker; the tests read what it committed
(read_committed) and what it says about itself (/metrics, /readyz, its log).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.sink.output import H_CLASS, H_OFFSET, H_PARTITION, H_STEP
from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge
from tests.support.bridge import (
    BridgeProcess,
    base_settings,
    bridge_topics,
    http_get,
    metric,
    metrics_when,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration

GOOD = 2000
SUMMARY = re.compile(r"dead-lettered (\d+) of (\d+) records in this checkpoint")

STATELESS_SPEC = """
steps:
  - set:
      cents: "int(amount * 100)"
      scaled: "amount * factor"
      per: "amount / factor"
      note: "float(note)"
  - route: "dest"
"""


def _mix(
    good: list[dict[str, Any]], bad: list[tuple[bytes, str]], copies: int = 3
) -> tuple[list[bytes], dict[int, str]]:
    """``good`` values with ``copies`` of each bad one at seeded random places; returns the
    values in order and the expected error class by index."""
    values: list[bytes | tuple[bytes, str]] = [orjson.dumps(v) for v in good]
    rng = random.Random(12)
    for item in bad * copies:
        values.insert(rng.randrange(len(values) + 1), item)
    expected = {i: v[1] for i, v in enumerate(values) if isinstance(v, tuple)}
    return [v[0] if isinstance(v, tuple) else v for v in values], expected


def _seed_two_partitions(
    kafka: KafkaFixture, src: str, values: list[bytes]
) -> dict[tuple[int, int], int]:
    """Even indices to partition 0, odd to 1; returns (partition, offset) → index."""
    where: dict[tuple[int, int], int] = {}
    for p in (0, 1):
        part = values[p::2]
        kafka.seed(src, part, partition=p)
        where |= {(p, off): 2 * off + p for off in range(len(part))}
    return where


def _dead_letters(kafka: KafkaFixture, dlq: str) -> dict[tuple[int, int], tuple[str, str]]:
    """(source partition, offset) → (error class, step); fails on a duplicate."""
    got: dict[tuple[int, int], tuple[str, str]] = {}
    for r in kafka.read_all(dlq):
        source = (int(r.header(H_PARTITION) or b"-1"), int(r.header(H_OFFSET) or b"-1"))
        assert source not in got, f"dead-lettered twice: {source}"
        got[source] = ((r.header(H_CLASS) or b"").decode(), (r.header(H_STEP) or b"").decode())
    return got


def _run_spec(
    kafka: KafkaFixture,
    tmp_path: Path,
    bridges: MakeBridge,
    topics: tuple[str, str, str],
    spec: str,
) -> Any:
    """Run a bridge with ``spec`` until it committed all its input, check it stayed healthy,
    and return the dead letters."""
    src, out, dlq = topics
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    settings = base_settings(kafka, src, out, dlq, pipeline_spec=str(path), record_retries=0)
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    _assert_no_trouble(bridge)
    return _dead_letters(kafka, dlq)


def _assert_no_trouble(bridge: BridgeProcess) -> None:
    assert bridge.terminate() == 0
    logs = bridge.logs()
    assert "Traceback" not in logs
    assert "aborting transaction" not in logs
    assert "dead-lettering " not in logs  # the old per-record line


def test_each_bad_value_is_dead_lettered_once_with_its_class(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    side = kafka.create_topic(kafka.unique("side"), 2)
    good = [
        {"id": i, "amount": i % 97, "factor": 1.5, "note": "0.5", "dest": side if i % 10 else None}
        for i in range(GOOD)
    ]
    base = {"amount": 3, "factor": 1.5, "note": "0.5", "dest": None}
    bad = [
        (orjson.dumps({**base, "amount": 1e20}), "OutputNotEncodable"),  # cents ≥ 2**64
        (orjson.dumps({**base, "amount": 10, "factor": 1e308}), "ExpressionLimit"),  # inf
        (orjson.dumps({**base, "note": "nan"}), "ExpressionLimit"),  # NaN
        (orjson.dumps({**base, "amount": "abc"}), "ValueError"),
        (orjson.dumps({**base, "amount": [1]}), "TypeError"),
        (orjson.dumps({**base, "factor": 0}), "ZeroDivisionError"),
        (orjson.dumps({**base, "dest": 42}), "InvalidRoute"),
        (orjson.dumps({**base, "dest": ""}), "InvalidRoute"),
        (orjson.dumps({**base, "dest": kafka.unique("missing")}), "UnknownRouteTopic"),
        (b'{"amount": 1e400}', "DeserializationError"),
    ]
    values, expected = _mix(good, bad)
    where = _seed_two_partitions(kafka, src, values)
    dead = _run_spec(kafka, tmp_path, bridges, (src, out, dlq), STATELESS_SPEC)
    assert {where[s]: cls for s, (cls, _) in dead.items()} == expected
    steps = {cls: {step for c, step in dead.values() if c == cls} for cls in expected.values()}
    assert steps["InvalidRoute"] == steps["UnknownRouteTopic"] == {"route"}
    assert steps["OutputNotEncodable"] == {"output"}
    assert steps["DeserializationError"] == {"deserialize"}
    for raised in ("ValueError", "TypeError", "ZeroDivisionError", "ExpressionLimit"):
        (step,) = steps[raised]
        assert "steps[0]" in step  # the spec's set step, by its location
    outputs = [orjson.loads(r.value or b"") for r in kafka.read_all([out, side])]
    assert sorted(v["id"] for v in outputs) == list(range(GOOD))  # each once
    assert all(v["cents"] == v["amount"] * 100 and v["note"] == 0.5 for v in outputs)
    assert sum(1 for r in kafka.read_all(side)) == sum(1 for v in good if v["dest"])


SUM_SPEC = """
steps:
  - key_by: {by: user, repartition: false}
  - sum: amount
"""  # per input partition, as the reference computes it


def test_sum_overflow_dead_letters_the_record_and_the_sums_stay_right(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    good = [{"user": f"u{i % 7}", "amount": i % 13} for i in range(GOOD)]
    bad = [  # three copies each: two land in one partition, and the second one overflows
        (orjson.dumps({"user": "big", "amount": 2**62}), ""),
        (orjson.dumps({"user": "flt", "amount": 1e308}), ""),
        (orjson.dumps({"user": "u1", "amount": "x"}), ""),
    ]
    values, _ = _mix(good, bad)
    expected, sums = _reference(values)
    assert list(expected.values()).count("AggregateOverflow") >= 2
    where = _seed_two_partitions(kafka, src, values)
    dead = _run_spec(kafka, tmp_path, bridges, (src, out, dlq), SUM_SPEC)
    assert {where[s]: cls for s, (cls, _) in dead.items()} == expected
    outputs = [orjson.loads(r.value or b"") for r in kafka.read_all(out)]
    got = {where[(v["_source_partition"], v["_source_offset"])]: v["sum"] for v in outputs}
    assert len(got) == len(outputs)  # each input at most once...
    assert got == sums  # ...every good one, with the right running sum


def _reference(values: list[bytes]) -> tuple[dict[int, str], dict[int, int | float]]:
    """What the sum step must do, by index (partition = index % 2, see the seeding): the
    failures with their class, and the running sum per (partition, key) of the others."""
    failures: dict[int, str] = {}
    sums: dict[int, int | float] = {}
    totals: dict[tuple[int, str], int | float] = {}
    for i, raw in enumerate(values):
        v = orjson.loads(raw)
        if not isinstance(v["amount"], int | float):
            failures[i] = "TypeError"
            continue
        slot = (i % 2, v["user"])
        total = totals.get(slot, 0) + v["amount"]
        if not -(2**63) <= total < 2**63 and (isinstance(total, int) or total == float("inf")):
            failures[i] = "AggregateOverflow"
            continue
        totals[slot] = sums[i] = total
    return failures, sums


def test_route_to_a_missing_topic_runs_at_full_speed_without_aborts(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    missing = kafka.unique("missing")
    n = 20_000
    values = [orjson.dumps({"id": i, "dest": missing if i % 2 else None}) for i in range(n)]
    kafka.seed(src, values[0::2], partition=0)
    kafka.seed(src, values[1::2], partition=1)
    spec = tmp_path / "spec.yaml"
    spec.write_text('steps:\n  - route: "dest"\n')
    port = free_port()
    settings = base_settings(
        kafka, src, out, dlq, pipeline_spec=str(spec), transaction_timeout_ms=20_000,
        commit_interval=1.0, http_port=port,
    )  # fmt: skip
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 300, [bridge])
    text = metrics_when(
        port,
        lambda t: (
            metric(t, "eos_bridge_dead_letter_records_total") >= n // 2
            and metric(t, "eos_bridge_checkpoints_total") >= 1
        ),
        "the last checkpoint and its dead letters counted",
    )
    _assert_no_trouble(bridge)

    assert metric(text, "eos_bridge_transaction_aborts_total") == 0
    assert metric(text, "eos_bridge_checkpoints_total") >= 1
    dead = metric(text, "eos_bridge_dead_letter_records_total", error_class="UnknownRouteTopic")
    assert dead == n // 2
    assert {cls for cls, _ in _dead_letters(kafka, dlq).values()} == {"UnknownRouteTopic"}
    assert len(kafka.read_all(dlq)) == n // 2
    assert sorted(orjson.loads(r.value or b"")["id"] for r in kafka.read_all(out)) == list(
        range(0, n, 2)
    )


MISSPELLED_SPEC = 'steps:\n  - set: {cents: "int(amout * 100)"}\n'


def _misspelled_bridge(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path, **extra: object
) -> tuple[BridgeProcess, dict[str, Any], str, str]:
    src, out, dlq = bridge_topics(kafka, 2)
    spec = tmp_path / "spec.yaml"
    spec.write_text(MISSPELLED_SPEC)
    settings = base_settings(
        kafka, src, out, dlq, pipeline_spec=str(spec), http_port=free_port(), **extra
    )
    return bridges(**settings).start(), settings, src, dlq


def test_a_misspelled_field_makes_the_bridge_not_ready_and_says_why(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    bridge, settings, src, dlq = _misspelled_bridge(
        kafka, bridges, tmp_path, max_dead_letter_ratio=0.5
    )
    port = settings["http_port"]
    kafka.seed(src, [orjson.dumps({"amount": i}) for i in range(GOOD)], partition=0)
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])

    def not_ready_for_ratio() -> bool:
        status, body = http_get(port, "/readyz")
        return status == 503 and "max_dead_letter_ratio=0.5" in body

    wait_until(not_ready_for_ratio, 60, "/readyz to report the dead-letter ratio")
    (cls, step), *_ = _dead_letters(kafka, dlq).values()
    assert http_get(port, "/livez")[0] == 200  # running, just not healthy
    assert bridge.running()
    _assert_no_trouble(bridge)
    lines = [ln for ln in bridge.logs().splitlines() if "exceeds max_dead_letter_ratio" in ln]
    assert len(lines) == 1, lines
    assert f"step {step!r} fails most, with {cls}" in lines[0]
    assert "amout" in lines[0]  # the first example names the misspelled field


def test_without_a_limit_dead_letters_are_summarised_once_per_checkpoint(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    bridge, settings, src, _ = _misspelled_bridge(kafka, bridges, tmp_path)
    port = settings["http_port"]
    for phase in range(4):  # four batches, so several checkpoints
        values = [orjson.dumps({"amount": i}) for i in range(phase * 500, (phase + 1) * 500)]
        kafka.seed(src, values, partition=phase % 2)
        wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])

    def summaries() -> list[tuple[int, int]]:
        return [(int(d), int(n)) for d, n in SUMMARY.findall(bridge.logs())]

    def one_line_per_checkpoint() -> bool:
        checkpoints = metric(http_get(port, "/metrics")[1], "eos_bridge_checkpoints_total")
        return checkpoints >= 4 and len(summaries()) == checkpoints

    wait_until(one_line_per_checkpoint, 60, "one summary line per committed checkpoint")
    assert http_get(port, "/readyz")[0] == 200  # no limit set: only visible, not unready
    _assert_no_trouble(bridge)
    assert sum(d for d, _ in summaries()) == GOOD  # each dead letter counted once
    assert all(d == n for d, n in summaries())
    assert len(summaries()) < GOOD // 100
