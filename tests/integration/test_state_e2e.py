"""State end to end: the bridge as a subprocess, counting and deduplicating exactly once
through SIGKILLs, wiped or stale local state, failed checkpoints and rebalances."""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from changelog.naming import changelog_topic_name
from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge as Make
from tests.support.bridge import (
    BridgeProcess,
    base_settings,
    bridge_topics,
    http_get,
    json_records,
    metric,
)
from tests.support.feed import Feeder, feed_and_catch_up, kill_in_open_transaction
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


def _setup(
    kafka: KafkaFixture, tmp_path: Path, n: int, pipeline: str, **extra: object
) -> tuple[dict[str, Any], Feeder]:
    """Settings of one bridge and the test's ``n`` input records, not fed yet."""
    src, out, dlq = bridge_topics(kafka)
    settings = base_settings(
        kafka,
        src,
        out,
        dlq,
        batch_size=500,
        state_dir=str(tmp_path / "state-i0"),
        pipeline=f"tests.state_pipelines:{pipeline}",
        **extra,
    )
    return settings, Feeder(kafka, src, *json_records(n))


def assert_counts_exact(kafka: KafkaFixture, src: str, out: str) -> None:
    """Every input counted once, in order: per key the emitted counts are exactly 1..n."""
    inputs = kafka.read_all(src)
    outputs = [orjson.loads(r.value) for r in kafka.read_all(out)]
    sources = [(o["_source_partition"], o["_source_offset"]) for o in outputs]
    repeated = [s for s, c in Counter(sources).items() if c > 1]
    assert not repeated, f"{len(repeated)} updates emitted twice, e.g. {repeated[:5]}"
    assert set(sources) == {(r.partition, r.offset) for r in inputs}, "inputs without output"
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for o in outputs:
        by_key[o["key"]].append((o["_source_offset"], o["count"]))
    reference = Counter(r.key.decode() for r in inputs if r.key is not None)
    for key, updates in by_key.items():
        counts = [c for _, c in sorted(updates)]
        assert counts == list(range(1, reference[key] + 1)), f"key {key}: counts {counts[:20]}..."
    assert {k: max(c for _, c in u) for k, u in by_key.items()} == dict(reference)
    assert kafka.end_offsets(out, True) == kafka.end_offsets(out, False), "hanging transaction"


def _kill(kafka: KafkaFixture, bridge: BridgeProcess, s: dict[str, Any], feeder: Feeder) -> None:
    """SIGKILL inside an open transaction that holds count updates."""
    kill_in_open_transaction(kafka, bridge, feeder, s["group_id"], s["output_topic"], 2_000)


def _phase(
    kafka: KafkaFixture, feeder: Feeder, s: dict[str, Any], n: int | None, *running: BridgeProcess
) -> None:
    feed_and_catch_up(kafka, feeder, s["group_id"], n, running)


def _finish(kafka: KafkaFixture, bridge: BridgeProcess, s: dict[str, Any], feeder: Feeder) -> None:
    """Feed the rest, wait until all is committed, stop cleanly."""
    _phase(kafka, feeder, s, None, bridge)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]


@pytest.mark.chaos
def test_count_200k_through_three_sigkills(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """Acceptance 2."""
    s, feeder = _setup(kafka, tmp_path, 200_000, "counting")
    bridge = bridges(**s).start()
    for _ in range(3):
        _phase(kafka, feeder, s, 40_000, bridge)
        _kill(kafka, bridge, s, feeder)
        bridge.start()
    _finish(kafka, bridge, s, feeder)
    assert bridge.starts >= 4
    assert "restoring changelog__" in bridge.logs(), "restarts must restore state"
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_wiped_local_state_is_rebuilt_from_the_changelog(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """Acceptance 3: state wiped between restarts (after a kill and after a clean stop)."""
    s, feeder = _setup(kafka, tmp_path, 60_000, "counting")
    bridge = bridges(**s).start()
    _phase(kafka, feeder, s, 15_000, bridge)
    _kill(kafka, bridge, s, feeder)
    shutil.rmtree(s["state_dir"])
    bridge.start()
    _phase(kafka, feeder, s, 20_000, bridge)
    assert bridge.terminate() == 0
    shutil.rmtree(s["state_dir"])
    bridge.start()
    _finish(kafka, bridge, s, feeder)
    runs = bridge.logs().split("===== start #")[1:]
    assert all("restored changelog__" in run for run in runs[1:]), (
        "every restart after a wipe must restore from the changelog"
    )
    assert "restored changelog__" not in runs[0]
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_error_while_processing(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance 4, Quix scenario 1: the process dies mid-batch; state rolls back with it."""
    s, feeder = _setup(kafka, tmp_path, 40_000, "crashing_count")
    feeder.feed()
    marker = tmp_path / "crash-marker"
    monkeypatch.setenv("EOS_TEST_CRASH_MARKER", str(marker))
    bridge = bridges(**s).start()
    assert bridge.wait(120) == 17, bridge.logs()[-3000:]
    assert marker.exists()
    bridge.start()
    _finish(kafka, bridge, s, feeder)
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_changelog_produce_fails(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance 4, Quix scenario 2: producing a changelog record fails in checkpoint step 1
    after other changelog records went into the transaction; the checkpoint aborts, its state
    is dropped, the input is replayed."""
    s, feeder = _setup(kafka, tmp_path, 40_000, "poisoned_count")
    marker = tmp_path / "poison-marker"
    monkeypatch.setenv("EOS_TEST_POISON_MARKER", str(marker))
    bridge = bridges(**s).start()
    _finish(kafka, bridge, s, feeder)
    assert marker.exists()
    assert "aborting transaction: changelog produce to changelog__" in bridge.logs()
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_offset_commit_fails(kafka: KafkaFixture, tmp_path: Path, bridges: Make) -> None:
    """Acceptance 4, Quix scenario 3: changelog records are produced but the checkpoint's
    offsets never commit (every 3rd checkpoint with records aborts after the flush), with a
    kill and a wipe so recovery has to read past the aborted changelog records.

    Each process is fed in three phases, each fed once the previous one is committed: at
    least three checkpoints with records, so the fault fires in both processes however fast
    the machine is (time-based checkpoints, so the kill still finds an open transaction)."""
    s, feeder = _setup(kafka, tmp_path, 50_000, "counting", faults={"abort_every": 3})
    bridge = bridges(**s).start()
    for _ in range(3):
        _phase(kafka, feeder, s, 5_000, bridge)
    assert bridge.logs().count("fault injection: aborting checkpoint") >= 1
    _kill(kafka, bridge, s, feeder)
    shutil.rmtree(s["state_dir"])
    bridge.start()
    for _ in range(3):
        _phase(kafka, feeder, s, 2_000, bridge)
    _finish(kafka, bridge, s, feeder)
    assert bridge.logs().count("fault injection: aborting checkpoint") >= 2
    changelog = changelog_topic_name(s["group_id"], s["input_topics"][0], "counts")
    assert len(kafka.read_all(changelog, read_committed=False)) > len(kafka.read_all(changelog))
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_count_with_pipelined_commit_through_aborts_and_sigkills(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """``pipelined_commit`` with state: each commit runs beside the next batches' counts (their
    updates wait in a layer above the committing one), every 3rd checkpoint aborts after its
    flush (the batches counted beside it are dropped with it), and two SIGKILLs land inside
    open transactions: every input counted exactly once.

    A checkpoint is due every 1,000 records (two batches), and each phase's 20,000 records are
    in the topic before the bridge starts reading them, so when one is due the next batches are
    already there to fetch: checkpoints run pipelined however fast the machine is (the metric
    says how many)."""
    s, feeder = _setup(
        kafka, tmp_path, 60_000, "counting",
        pipelined_commit=True, commit_every=1_000, faults={"abort_every": 3},
    )  # fmt: skip
    port = free_port()
    bridge = bridges(**s, http_port=port)
    pipelined = 0.0
    for _ in range(2):
        feeder.feed(20_000)
        bridge.start()
        _phase(kafka, feeder, s, 0, bridge)  # wait until all of it is committed
        status, text = http_get(port, "/metrics")
        assert status == 200, bridge.logs()[-3000:]
        pipelined += metric(text, "eos_bridge_checkpoints_pipelined_total")
        _kill(kafka, bridge, s, feeder)
    bridge.start()
    _finish(kafka, bridge, s, feeder)
    logs = bridge.logs()
    assert "pipelined_commit: each commit runs beside the next batch's pipeline" in logs
    assert pipelined > 0, "no checkpoint ran beside the next batch"
    assert logs.count("fault injection: aborting checkpoint") >= 1
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_crash_after_commit_before_state_flush(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """Acceptance 4, Quix scenario 4: local RocksDB behind the committed changelog (as after a
    crash between the commit and the WriteBatch): an old copy of the state is put back."""
    s, feeder = _setup(kafka, tmp_path, 60_000, "counting")
    bridge = bridges(**s).start()
    _phase(kafka, feeder, s, 15_000, bridge)
    assert bridge.terminate() == 0
    snapshot = tmp_path / "snapshot"
    shutil.copytree(s["state_dir"], snapshot)
    bridge.start()
    _phase(kafka, feeder, s, 20_000, bridge)
    _kill(kafka, bridge, s, feeder)
    shutil.rmtree(s["state_dir"])
    shutil.copytree(snapshot, s["state_dir"])
    bridge.start()
    _finish(kafka, bridge, s, feeder)
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])


@pytest.mark.chaos
def test_dedupe_at_least_once_upstream(kafka: KafkaFixture, tmp_path: Path, bridges: Make) -> None:
    """Acceptance 6: every id exactly once in the output, across SIGKILLs."""
    src = kafka.create_topic(kafka.unique("in"), 4)
    out = kafka.create_topic(kafka.unique("out"), 4)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    ids = [f"r{i}" for i in range(30_000)]
    # An at-least-once upstream: every 3rd id again right away, every 5th again much later.
    sent = [i for n, i in enumerate(ids) for _ in range(2 if n % 3 == 0 else 1)] + ids[::5]
    feeder = Feeder(kafka, src, [orjson.dumps({"id": i}) for i in sent], [i.encode() for i in sent])
    s = {
        "bootstrap_servers": kafka.bootstrap, "input_topics": [src], "output_topic": out,
        "dlq_topic": dlq, "group_id": kafka.unique("g"), "instance_id": "i0",
        "commit_interval": 0.5, "batch_size": 500, "state_dir": str(tmp_path / "state"),
        "pipeline": "tests.state_pipelines:deduping",
    }  # fmt: skip
    bridge = bridges(**s).start()
    for _ in range(2):
        _phase(kafka, feeder, s, 10_000, bridge)
        _kill(kafka, bridge, s, feeder)
        bridge.start()
    _finish(kafka, bridge, s, feeder)
    got = Counter(orjson.loads(r.value)["id"] for r in kafka.read_all(out))
    assert set(got) == set(ids), f"{len(set(ids) - set(got))} ids missing"
    twice = {i: c for i, c in got.items() if c > 1}
    assert not twice, f"{len(twice)} ids emitted more than once, e.g. {list(twice.items())[:5]}"


def _records_in(port: int) -> float:
    status, text = http_get(port, "/metrics")
    assert status == 200, f"/metrics on port {port} answered {status}"
    return metric(text, "eos_bridge_input_records_total")


@pytest.mark.chaos
def test_rebalance_one_two_one_with_state(
    kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    """Acceptance 7: partitions move to a second instance (own, empty state dir) and back; each
    moved partition is restored before it is processed, so counts continue exactly.

    Phased: each phase of input is fed only once the group is where the test wants it, so
    both instances provably work on their own partitions whatever the machine's speed."""
    # Static membership: a stopped member's partitions move after the session timeout.
    s, feeder = _setup(kafka, tmp_path, 90_000, "counting")
    s["consumer"] = kafka.fast_handover(s, session_ms=8000)
    ports = free_port(), free_port()
    first = bridges(**s, http_port=ports[0]).start()
    _phase(kafka, feeder, s, 30_000, first)
    second = bridges(
        **{**s, "instance_id": "i1", "state_dir": str(tmp_path / "state-i1")}, http_port=ports[1]
    ).start()
    wait_until(
        lambda: "state recovered for" in second.logs() or not second.running(),
        120, "second instance assigned and restored",
    )  # fmt: skip
    assert "restored changelog__" in second.logs(), second.logs()[-3000:]
    first_before = _records_in(ports[0])
    _phase(kafka, feeder, s, 30_000, first, second)
    # Both instances processed part of the second phase, and all of it is committed.
    assert _records_in(ports[1]) > 0, "the second instance processed nothing"
    assert _records_in(ports[0]) > first_before, "the first instance processed nothing"
    assert second.terminate() == 0, second.logs()[-3000:]
    _finish(kafka, first, s, feeder)
    assert_counts_exact(kafka, s["input_topics"][0], s["output_topic"])
