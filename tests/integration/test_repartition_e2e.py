"""Regrouping end to end (issue 51, acceptance 1): a ``key_by`` on a field that is not the
input key, or a ``dedupe`` by a field, before a stateful step: the records go through the
repartition topic and the results equal a plain-Python reference over the whole input (not
per input partition), through two SIGKILLs inside open transactions (read_committed)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.pipeline.split import repartition_topic_name
from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge as Make
from tests.support.bridge import BridgeProcess, base_settings, bridge_topics, wait_caught_up
from tests.support.cli import eos_bridge
from tests.support.feed import Feeder, kill_in_open_transaction
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration

REGIONS = ["apac", "emea", "amer", "latam"]
HOUR_MS = 3_600_000
T0 = 1_780_000_000_000 // HOUR_MS * HOUR_MS  # a fixed hour of 2026, well behind any wall clock


def _orders(n: int, hour: int, start: int) -> tuple[list[bytes], list[bytes]]:
    """``n`` orders of ``hour``, keyed by order id (spread over the input partitions)."""
    values, keys = [], []
    for i in range(start, start + n):
        ts = T0 + hour * HOUR_MS + (i * 7919) % HOUR_MS
        order = {"id": f"o{i}", "region": REGIONS[(i * 31) % 4], "amount": i % 997, "ts": ts}
        values.append(orjson.dumps(order))
        keys.append(f"o{i}".encode())
    return values, keys


def _setup(kafka: KafkaFixture, tmp_path: Path, spec: str) -> tuple[dict[str, Any], str, str, str]:
    src, out, dlq = bridge_topics(kafka, partitions=3)
    (tmp_path / "pipeline.yaml").write_text(spec)
    state, path = str(tmp_path / "state"), str(tmp_path / "pipeline.yaml")
    s = base_settings(kafka, src, out, dlq, batch_size=500, state_dir=state, pipeline_spec=path)
    return s, src, out, repartition_topic_name(s["group_id"], "key_by-0")


def _caught_up(kafka: KafkaFixture, s: dict[str, Any], rp: str, bridge: BridgeProcess) -> None:
    """Everything fed is committed: the input, then the repartition topic it was written to
    (none on a bridge that does not regroup: then the input alone, and the results say it)."""
    wait_caught_up(kafka, s["group_id"], s["input_topics"][0], 300, [bridge])
    if rp in kafka.producer().list_topics(timeout=10).topics:
        wait_caught_up(kafka, s["group_id"], rp, 300, [bridge])


def _mean_windows(orders: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[float, int]]:
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for o in orders:
        groups[(o["region"], o["ts"] // HOUR_MS * HOUR_MS)].append(o["amount"])
    return {k: (sum(v) / len(v), len(v)) for k, v in groups.items()}


@pytest.mark.chaos
def test_key_by_then_hourly_mean_is_one_exact_row_per_region_and_hour(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """The new user's pipeline: key_by region + an hourly mean over 3 input partitions keyed
    by order id, fed hour by hour (so no record is late), SIGKILLed in hours 1 and 2."""
    spec = (
        "steps:\n  - key_by: region\n"
        "  - window: {size: 3600, timestamp: ts, aggregate: {mean: amount, count: null},"
        " name: hourly}\n"
    )
    s, src, out, rp = _setup(kafka, tmp_path, spec)
    hours = [_orders(5000, h, h * 5000) for h in range(4)]
    # one record per region in hour 4: every window of hours 0-3 closes
    closer = [{"id": r, "region": r, "amount": 0, "ts": T0 + 4 * HOUR_MS} for r in REGIONS]
    closers = [orjson.dumps(c) for c in closer], [r.encode() for r in REGIONS]
    bridge = bridges(**s).start()
    for hour, (values, keys) in enumerate([*hours, closers]):
        feeder = Feeder(kafka, src, values, keys)
        # killed while hop records of this hour are in a transaction; chunks of more than two
        # batches, so a chunk is never all in the checkpoint that was due when it arrived
        if hour in (1, 2):
            kill_in_open_transaction(kafka, bridge, feeder, s["group_id"], rp, 1_200)
            bridge.start()
        feeder.feed()
        _caught_up(kafka, s, rp, bridge)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert bridge.starts >= 3

    orders = [orjson.loads(v) for values, _ in hours for v in values]
    reference = _mean_windows(orders)
    rows = [orjson.loads(r.value) for r in kafka.read_all(out)]
    got = Counter((r["key"], r["start"]) for r in rows)
    assert [k for k, c in got.items() if c > 1] == [], "more than one row per (key, window)"
    assert set(got) == set(reference), f"windows {sorted(set(got) ^ set(reference))[:5]}"
    for r in rows:
        mean, count = reference[(r["key"], r["start"])]
        assert r["mean_amount"] == mean, f"{r['key']} at {r['start']}: {r} != {mean}"
        assert r["count"] == count  # the mean with its count: rows combine downstream
        assert r["_source_topic"] == src  # the input record that closed it, not the hop's


@pytest.mark.chaos
def test_key_by_then_count_counts_each_input_once_per_new_key(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """key_by region + count: per region the counts are exactly 1..n, one per input record
    (named by its own input partition and offset), through two SIGKILLs."""
    s, src, out, rp = _setup(kafka, tmp_path, "steps:\n  - key_by: region\n  - count\n")
    values, keys = _orders(12_000, 0, 0)
    feeder = Feeder(kafka, src, values, keys)
    bridge = bridges(**s).start()
    for _ in range(2):
        kill_in_open_transaction(kafka, bridge, feeder, s["group_id"], out, 1_500)
        bridge.start()
    feeder.feed()
    _caught_up(kafka, s, rp, bridge)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    inputs = {(r.partition, r.offset): orjson.loads(r.value) for r in kafka.read_all(src)}
    outputs = [orjson.loads(r.value) for r in kafka.read_all(out)]
    sources = Counter((o["_source_partition"], o["_source_offset"]) for o in outputs)
    assert [s for s, c in sources.items() if c > 1] == [], "an input counted twice"
    assert set(sources) == set(inputs), "inputs without output"
    by_key: dict[str, list[int]] = defaultdict(list)
    for o in outputs:
        assert inputs[(o["_source_partition"], o["_source_offset"])]["region"] == o["key"]
        by_key[o["key"]].append(o["count"])
    reference = Counter(v["region"] for v in inputs.values())
    assert {k: sorted(c) for k, c in by_key.items()} == {
        k: list(range(1, n + 1)) for k, n in reference.items()
    }
    # verify re-runs the tail over the hop's committed records, as the bridge did
    args = ["verify", "--input", src, "--output", out, "--dlq", s["dlq_topic"]]
    args += ["--pipeline-spec", s["pipeline_spec"], "--group", s["group_id"]]
    result = eos_bridge(*args, env={"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap})
    assert result.code == 0, result.stdout + result.stderr
    assert f"{len(inputs)} in, {len(outputs)} out, 0 duplicates, 0 missing" in result.stdout


@pytest.mark.chaos
def test_dedupe_by_a_field_regroups_by_it(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """dedupe by a field of records keyed otherwise: repeats of an id arrive on other input
    partitions (another key each time) and are still dropped, through two SIGKILLs."""
    spec = "steps:\n  - dedupe: {by: uid, name: seen}\n"
    s, src, out, _ = _setup(kafka, tmp_path, spec)
    rp = repartition_topic_name(s["group_id"], "seen")
    ids = [f"u{i}" for i in range(9_000)]
    sent = list(enumerate(ids)) + [(9_000 + n, i) for n, i in enumerate(ids[::3])]
    values = [orjson.dumps({"uid": i, "n": n}) for n, i in sent]
    feeder = Feeder(kafka, src, values, [f"k{n}".encode() for n, _ in sent])
    bridge = bridges(**s).start()
    for _ in range(2):
        kill_in_open_transaction(kafka, bridge, feeder, s["group_id"], out, 1_500)
        bridge.start()
    feeder.feed()
    _caught_up(kafka, s, rp, bridge)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    got = Counter(orjson.loads(r.value)["uid"] for r in kafka.read_all(out))
    assert set(got) == set(ids), f"{len(set(ids) - set(got))} ids missing"
    assert {i: c for i, c in got.items() if c > 1} == {}, "repeats passed"


def test_repartition_partitions_move_with_their_state(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """A second instance (own, empty state dir) joins and leaves: the repartition topic's
    partitions it takes are restored from their changelogs there and back, so the counts per
    new key go on exactly (phased: each phase fed once the group is where the test wants it)."""
    s, src, out, rp = _setup(kafka, tmp_path, "steps:\n  - key_by: customer\n  - count\n")
    s["consumer"] = kafka.fast_handover(s, session_ms=8000)  # static: a stopped one's move then
    values = [
        orjson.dumps({"id": f"o{i}", "customer": f"c{(i * 31) % 60}", "amount": i % 97})
        for i in range(9_000)
    ]
    feeder = Feeder(kafka, src, values, [f"o{i}".encode() for i in range(9_000)])
    ports = free_port(), free_port()
    first = bridges(**s, http_port=ports[0]).start()
    feeder.feed(3_000)
    _caught_up(kafka, s, rp, first)
    state = str(tmp_path / "state-i1")
    second = bridges(**{**s, "instance_id": "i1", "state_dir": state}, http_port=ports[1]).start()
    wait_until(
        lambda: "state recovered for" in second.logs() or not second.running(),
        120,
        "second instance assigned and restored",
    )
    assert f"restored changelog__{s['group_id']}--{rp}--" in second.logs(), second.logs()[-3000:]
    feeder.feed(3_000)
    for bridge in (first, second):
        _caught_up(kafka, s, rp, bridge)
    assert second.terminate() == 0, second.logs()[-3000:]
    feeder.feed()
    _caught_up(kafka, s, rp, first)
    assert first.terminate() == 0, first.logs()[-3000:]

    inputs = {(r.partition, r.offset): orjson.loads(r.value) for r in kafka.read_all(src)}
    outputs = [orjson.loads(r.value) for r in kafka.read_all(out)]
    sources = Counter((o["_source_partition"], o["_source_offset"]) for o in outputs)
    assert [s for s, c in sources.items() if c > 1] == [] and set(sources) == set(inputs)
    by_key: dict[str, list[int]] = defaultdict(list)
    for o in outputs:
        by_key[o["key"]].append(o["count"])
    reference = Counter(v["customer"] for v in inputs.values())
    assert {k: sorted(c) for k, c in by_key.items()} == {
        k: list(range(1, n + 1)) for k, n in reference.items()
    }


def test_a_dead_letter_from_the_tail_names_its_input_record_and_leaves_no_count(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """key_by region + count + a route to a missing topic for the records at offset 7 of the
    hop (the tail's steps see the hop's record; dead letters and outputs name the input's):
    those become dead letters that name their own input topic, partition and offset, and
    leave the count as it was — no region's counts have a gap where a dead letter was
    (issue 51, acceptance 3, through the hop)."""
    route = "  - route: \"'no-such-topic' if _source_offset == 7 else None\"\n"
    s, src, out, rp = _setup(kafka, tmp_path, "steps:\n  - key_by: region\n  - count\n" + route)
    values, keys = _orders(400, 0, 0)
    bridge = bridges(**s).start()
    Feeder(kafka, src, values, keys).feed()
    _caught_up(kafka, s, rp, bridge)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    inputs = kafka.read_all(src)
    region = {(r.partition, r.offset): orjson.loads(r.value)["region"] for r in inputs}
    named = []
    for d in kafka.read_all(s["dlq_topic"]):
        topic, p, o = (d.header(f"eos.dlq.source.{h}") for h in ("topic", "partition", "offset"))
        assert topic == src.encode(), topic
        named.append((int(p or -1), int(o or -1)))
    at_7 = [r for r in kafka.read_all(rp) if r.offset == 7]
    assert len(named) == len(set(named)) == len(at_7) >= 1  # each hop record at 7, once
    assert all(where in region for where in named)  # named by their input records
    counts: dict[str, list[int]] = defaultdict(list)
    for r in kafka.read_all(out):
        counts[orjson.loads(r.value)["key"]].append(orjson.loads(r.value)["count"])
    counted = Counter(region[where] for where in region if where not in named)
    assert {k: sorted(c) for k, c in counts.items()} == {
        name: list(range(1, n + 1)) for name, n in counted.items()
    }  # no gap where a dead letter was: it left no trace in the count


def test_at_least_once_regroups_too(kafka: KafkaFixture, tmp_path: Path, bridges: Make) -> None:
    """processing_guarantee=at-least-once: the hop is written without a transaction and its
    offsets committed after the flush; without faults every count is still exact."""
    s, src, out, rp = _setup(kafka, tmp_path, "steps:\n  - key_by: region\n  - count\n")
    values, keys = _orders(2_000, 0, 0)
    bridge = bridges(**s, processing_guarantee="at-least-once").start()
    Feeder(kafka, src, values, keys).feed()
    _caught_up(kafka, s, rp, bridge)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    counts: dict[str, list[int]] = defaultdict(list)
    for r in kafka.read_all(out):
        o = orjson.loads(r.value)
        counts[o["key"]].append(o["count"])
    reference = Counter(orjson.loads(v)["region"] for v in values)
    assert {k: sorted(c) for k, c in counts.items()} == {
        k: list(range(1, n + 1)) for k, n in reference.items()
    }
