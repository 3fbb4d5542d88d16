"""Exactly-once between two clusters (docs/cross-cluster.md): the positions in the target's
offsets topic, one transactional producer per input partition; the bridge as a subprocess,
the source on the session broker (``kafka``), the target on a second one (``target_kafka``).

``XCLUSTER_RECORDS`` sets the size of the SIGKILL and zombie tests (the issue's figure is
100,000; the suite runs 20,000 and 12,000). Both count per key (a stateful pipeline) and check the
counts against the input. The paused-zombie test fails when fencing is switched off: run it with
``XCLUSTER_SHARED_TXN_ID=1`` (the test rig then starts both bridges with the launcher's
``--shared-transactional-id``: every task shares one id per instance)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import MakeBridge as Make
from tests.support.bridge import base_settings, json_records
from tests.support.feed import Feeder
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.xcluster import (
    alive,
    assert_counts_exact_across,
    exactly_once_ids,
    target_positions,
    wait_stopped,
    xfeed_and_catch_up,
    xkill_in_open_transaction,
)

pytestmark = pytest.mark.integration

RECORDS = int(os.environ.get("XCLUSTER_RECORDS", "20000"))
# The zombie's own size: 12,000 in the suite (what it proves needs few), the 100,000
# with XCLUSTER_RECORDS.
ZOMBIE_RECORDS = int(os.environ.get("XCLUSTER_RECORDS", "12000"))
SHARED_ID_ENV = "XCLUSTER_SHARED_TXN_ID"  # the test rig's own switch: fencing off, to see it fail


def _setup(
    kafka: KafkaFixture, target: KafkaFixture, n: int, **extra: object
) -> tuple[dict[str, Any], Feeder]:
    src = kafka.create_topic(kafka.unique("in"), 4)
    out = target.create_topic(target.unique("out"), 4)
    dlq = target.create_topic(target.unique("dlq"), 1)
    s = base_settings(
        kafka, src, out, dlq, batch_size=500,
        target={"bootstrap_servers": target.bootstrap}, **extra,
    )  # fmt: skip
    return s, Feeder(kafka, src, *json_records(n))


@pytest.mark.chaos
def test_count_across_clusters_through_two_sigkills(
    kafka: KafkaFixture, target_kafka: KafkaFixture, tmp_path: Path, bridges: Make
) -> None:
    s, feeder = _setup(
        kafka, target_kafka, RECORDS, state_dir=str(tmp_path / "state"),
        pipeline="tests.state_pipelines:counting", mirror_offsets_to_source=True,
    )  # fmt: skip
    bridge = bridges(**s).start()
    for _ in range(2):
        xfeed_and_catch_up(kafka, target_kafka, feeder, s, RECORDS // 5, [bridge])
        xkill_in_open_transaction(kafka, target_kafka, bridge, feeder, s, 2_000)
        bridge.start()
    xfeed_and_catch_up(kafka, target_kafka, feeder, s, None, [bridge])
    src = s["input_topics"][0]
    # mirror_offsets_to_source: the source group shows the same positions (advisory).
    ends = kafka.end_offsets(src)
    wait_until(lambda: kafka.committed_offsets(s["group_id"], src) == ends, 120, "mirrored")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert bridge.starts == 3
    assert "restoring changelog__" in bridge.logs(), "restarts must restore state"
    assert_counts_exact_across(kafka, target_kafka, s["input_topics"][0], s["output_topic"])
    positions = target_positions(target_kafka, s)
    assert positions == {
        (s["input_topics"][0], p): end for p, end in kafka.end_offsets(s["input_topics"][0]).items()
    }


@pytest.mark.chaos
@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "count"])
def test_paused_zombie_across_clusters_is_fenced(
    kafka: KafkaFixture, target_kafka: KafkaFixture, tmp_path: Path, bridges: Make,
    stateful: bool,
) -> None:  # fmt: skip
    """A paused with its transaction open (output produced, offsets not yet), B takes all
    partitions and commits past it, A wakes and tries to commit: its task producers were
    fenced by B's init_transactions, so nothing of A's becomes visible (A exits 3).

    ``stateless`` is the fencing proof: A's open transaction outlives its pause by far (the
    broker's longest transaction timeout), so only fencing can stop it — with
    ``XCLUSTER_SHARED_TXN_ID=1`` it fails with duplicates. ``count`` (a stateful
    count, the issue's acceptance form) has a second line of defence that fencing-off does not
    get past: B's restore reads A's changelog partitions read_committed to their end, so B
    waits until A's transaction ends (fenced, or aborted by its 60 s timeout) before it goes on.
    """
    pause = tmp_path / "pause-a"
    n = ZOMBIE_RECORDS
    extra: dict[str, Any] = (
        {"pipeline": "tests.state_pipelines:counting"}
        if stateful
        else {"transaction_timeout_ms": 900_000}
    )
    s, feeder = _setup(kafka, target_kafka, n, **extra)
    s["consumer"] = kafka.fast_handover(s)  # B takes A's partitions 6 s after A pauses
    shared = {"shared_transactional_id": True} if os.environ.get(SHARED_ID_ENV) == "1" else {}
    a = bridges(
        **s, state_dir=str(tmp_path / "state-a"), faults={"pause_file": pause, **shared}
    ).start()
    xfeed_and_catch_up(kafka, target_kafka, feeder, s, 2_000, [a])
    b_settings = {**s, "instance_id": "i1", "state_dir": str(tmp_path / "state-b")}
    b = bridges(**b_settings, faults=shared).start()
    wait_until(lambda: _owns(b, 2) or alive([a, b]), 180, "B to own two partitions")
    xfeed_and_catch_up(kafka, target_kafka, feeder, s, 2_000, [a, b])
    pause.touch()  # A stops itself at its next checkpoint, before writing the offsets
    feeder.feed(2_000)
    wait_stopped(a, 180)
    # A's session expires; B owns all four partitions, then commits everything fed.
    wait_until(lambda: _owns(b, 4) or alive([b]), 180, "B to own all four partitions")
    xfeed_and_catch_up(kafka, target_kafka, feeder, s, 2_000, [b])
    os.kill(a.pid, signal.SIGCONT)  # A wakes up in its stale transaction and commits
    code = _exit_code(a)
    xfeed_and_catch_up(kafka, target_kafka, feeder, s, None, [b])
    assert b.terminate() == 0, b.logs()[-3000:]
    if a.running():
        a.terminate()
    if stateful:  # every input counted once, per key 1..n in order, LSO == HW on the target
        assert_counts_exact_across(kafka, target_kafka, s["input_topics"][0], s["output_topic"])
    else:
        duplicates, missing = exactly_once_ids(target_kafka, s["output_topic"], n)
        assert (duplicates, missing) == (0, 0), f"{duplicates} duplicates, {missing} missing"
        out = s["output_topic"]
        assert target_kafka.end_offsets(out, True) == target_kafka.end_offsets(out, False)
    assert code == 3, a.logs()[-3000:]
    assert "another instance owns its input partition now" in a.logs()


def _owns(bridge: Any, tasks: int) -> bool:
    """The bridge's last assignment holds ``tasks`` tasks (its log line ``tasks [...]:``)."""
    lines = [
        line for line in bridge.logs().splitlines() if "tasks [" in line and "starting at" in line
    ]
    return bool(lines) and lines[-1].split("tasks [", 1)[1].split("]", 1)[0].count(",") + 1 == tasks


def _exit_code(bridge: Any) -> int | None:
    """A fenced zombie exits at once (3); one that was not fenced commits and runs on."""
    try:
        return int(bridge.wait(60))
    except Exception:  # still running: it was not fenced
        return None
