"""``eos-bridge dlq replay`` after a pipeline fix: the dead letters go back to their input topic
and the running (fixed) bridge processes them with its live state, so the output is what the
pipeline would have made had they been good when they came — stateless, count and window
pipelines; a second run writes nothing and says so; a run SIGKILLed inside its second
transaction and run again writes nothing twice."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from devkit.kafka.cluster import die_with_parent
from tests.support.bridge import REPO, base_settings, wait_caught_up
from tests.support.feed import open_records
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.replay_fault import HOLDING

pytestmark = pytest.mark.integration

HOUR = 3_600_000
T0 = 1_772_359_200_000  # 2026-03-01T10:00:00Z: window times well in the past


def _env(settings: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    env |= {f"BRIDGE_{k.upper()}": str(v) for k, v in settings.items() if k != "input_topics"}
    env |= {"BRIDGE_INPUT_TOPICS": ",".join(settings["input_topics"]), "PYTHONPATH": str(REPO)}
    return env | {"BRIDGE_HTTP_PORT": "0"}


def _replay(settings: dict[str, Any], *args: str) -> str:
    """Run ``dlq replay`` to its end; its output (exit 0 asserted)."""
    done = subprocess.run(
        [sys.executable, "-m", "app", "dlq", "replay", settings["dlq_topic"], *args],
        env=_env(settings),
        capture_output=True,
        cwd=REPO,
        timeout=180,
    )
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, output[-3000:]
    return output


def _produce(kafka: KafkaFixture, topic: str, records: list[tuple[int, bytes, dict, int]]) -> None:
    """(partition, key, value, timestamp) each."""
    producer = kafka.producer()
    for partition, key, value, ts in records:
        producer.produce(topic, orjson.dumps(value), key, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def _fixed_after_strict(
    kafka: KafkaFixture, bridges: Any, settings: dict[str, Any], strict: str, fixed: str
) -> Any:
    """Run the strict pipeline over the input, then start the fixed one in the same group."""
    src = settings["input_topics"][0]
    first = bridges(**settings, pipeline=strict).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [first])
    assert first.terminate() == 0
    settings["pipeline"] = fixed  # the bridge's and the replay's configuration
    return bridges(**settings).start()


def _keyed(n: int, partitions: int = 3) -> list[tuple[int, bytes, dict, int]]:
    """``n`` records over 9 keys (key ``u<i>`` always on partition ``i % partitions``); every
    5th a legacy one, which the strict pipeline dead-letters."""
    out = []
    for i in range(n):
        k = i % 9
        value = {"id": f"r{i}", "amount": i, "legacy": i % 5 == 2}
        out.append((k % partitions, f"u{k}".encode(), value, T0 + i))
    return out


def _topics(kafka: KafkaFixture) -> dict[str, Any]:
    # The records keep their 2026-03 timestamps: no time retention may delete them.
    keep = {"retention.ms": "-1"}
    src = kafka.create_topic(kafka.unique("in"), 3, keep)
    out = kafka.create_topic(kafka.unique("out"), 3, keep)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    return base_settings(kafka, src, out, dlq)


def _replayed_and_processed(kafka: KafkaFixture, settings: dict[str, Any], live: Any) -> None:
    wait_caught_up(kafka, settings["group_id"], settings["input_topics"][0], 180, [live])


def test_stateless_replay_writes_each_dead_letter_once_and_then_nothing(
    kafka: KafkaFixture, bridges: Any
) -> None:
    settings = _topics(kafka)
    src, out, dlq = settings["input_topics"][0], settings["output_topic"], settings["dlq_topic"]
    records = _keyed(60)
    _produce(kafka, src, records)
    live = _fixed_after_strict(
        kafka, bridges, settings, "tests.pipelines:plain_strict", "tests.pipelines:plain_fixed"
    )
    assert len(kafka.read_all(dlq)) == 12

    said = _replay(settings)
    assert "read 12, produced 12, skipped 0" in said, said
    _replayed_and_processed(kafka, settings, live)
    outputs = kafka.read_all(out)
    assert Counter(orjson.loads(r.value)["id"] for r in outputs) == Counter(
        v["id"] for _, _, v, _ in records
    )
    by_id = {orjson.loads(r.value)["id"]: r for r in outputs}
    for partition, key, value, ts in records:  # same partition, key, timestamp as the original
        r = by_id[value["id"]]
        assert (r.partition, r.key, r.timestamp) == (partition, key, ts), value
        names = {k for k, _ in r.headers or ()}
        assert not any(k.startswith("eos.dlq.") for k in names)
        assert ("eos.replay.run" in names) == value["legacy"]
    replayed = [r for r in kafka.read_all(src) if r.header("eos.replay.run")]
    sources = sorted(
        (
            int(r.header("eos.replay.source.partition") or b"-1"),
            int(r.header("eos.replay.source.offset") or b"-1"),
        )
        for r in replayed
    )
    assert sources == sorted(where for where, r in _offsets(records).items() if r[2]["legacy"])

    ends = kafka.end_offsets(src)
    again = _replay(settings)
    assert "nothing left to replay" in again, again
    assert kafka.end_offsets(src) == ends
    assert len(kafka.read_all(dlq)) == 12  # nothing failed again


def _offsets(
    records: list[tuple[int, bytes, dict, int]],
) -> dict[tuple[int, int], tuple[int, bytes, dict, int]]:
    """(partition, offset) → record, as produced in order to an empty topic."""
    seen: Counter[int] = Counter()
    out = {}
    for r in records:
        out[(r[0], seen[r[0]])] = r
        seen[r[0]] += 1
    return out


def test_count_replay_meets_the_live_counts_even_when_killed_mid_way(
    kafka: KafkaFixture, bridges: Any, tmp_path: Path
) -> None:
    settings = _topics(kafka)
    src, out = settings["input_topics"][0], settings["output_topic"]
    records = _keyed(180)  # 36 legacy ones: the replay's batches of 5 make 8 transactions
    _produce(kafka, src, records)
    live = _fixed_after_strict(
        kafka, bridges, settings, "tests.pipelines:counts_strict", "tests.pipelines:counts_fixed"
    )
    log = tmp_path / "replay.log"
    with open(log, "wb") as sink:
        killed = subprocess.Popen(
            [sys.executable, "-m", "tests.support.replay_fault", settings["dlq_topic"], "5"],
            env=_env(settings),
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            preexec_fn=die_with_parent,
        )
    try:
        wait_until(lambda: HOLDING in log.read_text(), 120, "the replay's second transaction")
        assert open_records(kafka, src) > 0  # the kill lands inside the open transaction
    finally:
        killed.kill()
        killed.wait(30)
    before = sum(1 for r in kafka.read_all(src) if r.header("eos.replay.run"))
    assert 0 < before < 36  # the first transaction committed, the second did not
    said = _replay(settings)
    assert f"read {36 - before}, produced {36 - before}" in said, said
    _replayed_and_processed(kafka, settings, live)

    # The output is the counts of every record once, as if none had ever failed.
    totals = Counter(key for _, key, _, _ in records)
    expected = Counter((k.decode(), c) for k, n in totals.items() for c in range(1, n + 1))
    got = Counter(
        (v["key"], v["count"]) for v in (orjson.loads(r.value) for r in kafka.read_all(out))
    )
    assert got == expected
    assert "nothing left to replay" in _replay(settings)


def test_window_replay_counts_what_is_within_grace_and_reports_the_late(
    kafka: KafkaFixture, bridges: Any
) -> None:
    settings = _topics(kafka)
    src, out = settings["input_topics"][0], settings["output_topic"]
    # Hours 0, 1 and 2 of 2026-03-01 10:00; legacy records in hours 0 and 2. When the strict
    # bridge is done, stream time is 2:40 everywhere: hour 0 closed at 1:30 (grace 30 min),
    # hour 2 is open until 3:30.
    records = []
    for i in range(54):
        hour, k = divmod(i, 18)
        legacy = hour != 1 and k % 4 == 1
        value = {"id": f"r{i}", "amount": i, "legacy": legacy, "hopeless": legacy and i == 41}
        ts = T0 + hour * HOUR + k * 60_000 + (40 * 60_000 if hour == 2 else 0)
        records.append(((k % 9) % 3, f"u{k % 9}".encode(), value, ts))
    _produce(kafka, src, records)
    live = _fixed_after_strict(
        kafka, bridges, settings, "tests.pipelines:hourly_strict", "tests.pipelines:hourly_fixed"
    )
    legacy = [r for r in records if r[2]["legacy"]]
    late = [r for r in legacy if r[3] < T0 + HOUR]
    said = _replay(settings, "--wait", "120")
    assert f"read {len(legacy)}, produced {len(legacy)}" in said, said
    assert "dead-lettered again by the bridge: 1 of 10" in said, said  # r41: the fix refuses it
    assert f"window 'window': {len(late)} will be dropped as late (grace 1800000 ms)" in said, said
    # Close hour 2 in every partition: a record at hour 4 per partition.
    _produce(
        kafka,
        src,
        [(p, f"u{p}".encode(), {"id": f"c{p}", "amount": 0}, T0 + 4 * HOUR) for p in range(3)],
    )
    _replayed_and_processed(kafka, settings, live)

    # Reference: each hour's sum per key over the records on time; late ones count nowhere.
    expected: Counter[tuple[str, int, int]] = Counter()
    sums: dict[tuple[str, int], int] = {}
    for record in records:
        _, key, value, ts = record
        if record in late or ts >= T0 + 3 * HOUR or value.get("hopeless"):
            continue
        start = ts - ts % HOUR
        sums[(key.decode(), start)] = sums.get((key.decode(), start), 0) + value["amount"]
    expected.update((k, start, total) for (k, start), total in sums.items())
    got = Counter(
        (v["key"], v["start"], v["value"])
        for v in (orjson.loads(r.value) for r in kafka.read_all(out))
    )
    assert got == expected


def test_a_replay_the_input_retention_would_delete_is_refused_before_writing(
    kafka: KafkaFixture,
) -> None:
    src = kafka.create_topic(kafka.unique("in"), 3)  # the default retention.ms: 7 days
    out = kafka.create_topic(kafka.unique("out"), 3)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    settings = base_settings(kafka, src, out, dlq)
    letter = [
        ("eos.dlq.source.topic", src.encode()),
        ("eos.dlq.source.partition", b"1"),
        ("eos.dlq.source.offset", b"0"),
        ("eos.dlq.source.timestamp", str(T0).encode()),
    ]
    kafka.seed(dlq, [b'{"id": "r0"}'], [b"u1"], headers=[letter])
    done = subprocess.run(
        [sys.executable, "-m", "app", "dlq", "replay", dlq],
        env=_env(settings),
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr.decode()[-3000:]
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "retention.ms" in lines[0] and f"{dlq}[0]@0" in lines[0], lines
    assert kafka.end_offsets(src, read_committed=False) == {0: 0, 1: 0, 2: 0}
    assert kafka.committed_offsets(f"{settings['group_id']}.replay", dlq) == {0: -1001}
