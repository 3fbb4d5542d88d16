"""Two clusters: where a cross-cluster bridge has got to (its positions live in the target's
offsets topic, not in the source group), and the exactly-once oracle across both."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import orjson
from confluent_kafka.admin import AdminClient

from app.offsets.target import latest_positions
from tests.support.bridge import BridgeProcess
from tests.support.feed import Feeder, open_records
from tests.support.kafka import KafkaFixture, wait_until


def target_positions(target: KafkaFixture, s: dict[str, Any]) -> dict[tuple[str, int], int]:
    """The committed positions of the bridge with settings ``s`` (read_committed)."""
    topic = s.get("offsets_topic") or f"{s['group_id']}.offsets"
    if (
        topic
        not in AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=10).topics
    ):
        return {}
    records = target.read_all(topic)
    return latest_positions(s["group_id"], ((r.key, r.value) for r in records))


def xcaught_up(kafka: KafkaFixture, target: KafkaFixture, s: dict[str, Any]) -> bool:
    """Every non-empty input partition's end is committed in the target's offsets topic."""
    positions = target_positions(target, s)
    return all(
        end == 0 or positions.get((topic, p), -1) >= end
        for topic in s["input_topics"]
        for p, end in kafka.end_offsets(topic).items()
    )


def alive(bridges: Sequence[BridgeProcess]) -> None:
    for b in bridges:
        if b.proc is not None and not b.running():
            raise AssertionError(f"bridge exited with {b.proc.returncode}:\n{b.logs()[-4000:]}")


def xfeed_and_catch_up(
    kafka: KafkaFixture,
    target: KafkaFixture,
    feeder: Feeder,
    s: dict[str, Any],
    n: int | None,
    bridges: Sequence[BridgeProcess],
    timeout: float = 300,
) -> None:
    """Feed the next ``n`` records (the rest when None), wait until all are committed."""
    feeder.feed(n)

    def done() -> bool:
        alive(bridges)
        return xcaught_up(kafka, target, s)

    wait_until(done, timeout, f"{s['group_id']} to commit everything fed", step=0.5)


def xkill_in_open_transaction(
    kafka: KafkaFixture,
    target: KafkaFixture,
    bridge: BridgeProcess,
    feeder: Feeder,
    s: dict[str, Any],
    chunk: int,
    timeout: float = 300,
) -> None:
    """SIGKILL ``bridge`` while a transaction holds records on the target's output topic
    (feeding ``chunk`` more each time it has caught up); restart and look again when it
    committed between the look and the kill."""
    out = s["output_topic"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive([bridge])
        if open_records(target, out) > 0:
            bridge.kill()
            if open_records(target, out) > 0:
                return
            bridge.start()
        elif xcaught_up(kafka, target, s) and not feeder.feed(chunk):
            raise AssertionError("input ran out before an open transaction was seen")
        time.sleep(0.05)
    raise AssertionError(f"no kill inside an open transaction on {out} within {timeout}s")


def assert_counts_exact_across(
    kafka: KafkaFixture, target: KafkaFixture, src: str, out: str
) -> None:
    """Every input (source cluster) counted once, in order, on the target (read_committed):
    per key the emitted counts are exactly 1..n; no transaction left open on the target."""
    inputs = kafka.read_all(src)
    outputs = [orjson.loads(r.value) for r in target.read_all(out)]
    sources = [(o["_source_partition"], o["_source_offset"]) for o in outputs]
    repeated = [x for x, c in Counter(sources).items() if c > 1]
    assert not repeated, f"{len(repeated)} updates emitted twice, e.g. {repeated[:5]}"
    missing = {(r.partition, r.offset) for r in inputs} - set(sources)
    assert not missing, f"{len(missing)} inputs without output, e.g. {sorted(missing)[:5]}"
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for o in outputs:
        by_key[o["key"]].append((o["_source_offset"], o["count"]))
    reference = Counter(r.key.decode() for r in inputs if r.key is not None)
    for key, updates in by_key.items():
        counts = [c for _, c in sorted(updates)]
        assert counts == list(range(1, reference[key] + 1)), f"key {key}: counts {counts[:20]}..."
    assert target.end_offsets(out, True) == target.end_offsets(out, False), "LSO != HW on target"


def wait_stopped(bridge: BridgeProcess, timeout: float) -> None:
    """Until the process is stopped (SIGSTOP: state ``T`` in /proc)."""

    def stopped() -> bool:
        alive([bridge])
        with open(f"/proc/{bridge.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")

    wait_until(stopped, timeout, f"bridge {bridge.pid} to stop itself")


def exactly_once_ids(target: KafkaFixture, out: str, n: int) -> tuple[int, int]:
    """(duplicates, missing) of ids r0..r{n-1} on ``out`` (read_committed)."""
    ids = Counter(orjson.loads(r.value)["id"] for r in target.read_all(out))
    duplicates = sum(c - 1 for c in ids.values() if c > 1)
    missing = sum(1 for i in range(n) if f"r{i}" not in ids)
    return duplicates, missing
