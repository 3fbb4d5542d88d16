"""Faults of the bridge itself on the 3-broker cluster: a zombie instance, a step that stalls
past the transaction timeout, a rolling restart of the instances under load."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.chaos import faults
from tests.chaos.scene import Scene
from tests.support.bridge import BridgeProcess
from tests.support.feed import open_records

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

MakeScene = Callable[..., Scene]


def _pause_in_open_transaction(scene: Scene, bridge: BridgeProcess) -> None:
    """SIGSTOP ``bridge`` (the only instance) while its transaction holds output records; if
    it committed between the look and the stop, resume and look again."""
    for _ in range(50):
        scene.open_transaction()
        scene.sup.paused.add(bridge.pid)  # no liveness probe: paused on purpose
        os.kill(bridge.pid, signal.SIGSTOP)
        if open_records(scene.kafka, scene.out) > 0:
            return
        os.kill(bridge.pid, signal.SIGCONT)
        scene.sup.paused.discard(bridge.pid)
    raise AssertionError("never paused the bridge inside an open transaction")


def test_zombie_paused_past_session_timeout_is_fenced(scene_factory: MakeScene) -> None:
    scene = scene_factory().start(1)
    zombie = scene.bridges[0]
    scene.feed_and_commit(4000)
    _pause_in_open_transaction(scene, zombie)
    # B joins; it can only commit everything fed below once the group dropped the paused A
    # (past the session timeout) and gave B all partitions.
    scene.add_bridge().start()
    scene.feed_and_commit(4000)
    os.kill(zombie.pid, signal.SIGCONT)  # the zombie wakes up with its stale transaction
    scene.sup.paused.discard(zombie.pid)
    scene.feed_and_commit(4000)
    verdict = scene.finish()
    assert verdict.records == scene.feeder.fed
    assert verdict.aborted_uncommitted > 0, "the zombie's open transaction must be aborted"


def test_step_stalls_past_transaction_timeout(
    scene_factory: MakeScene, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAOS_STALL_DIR", str(tmp_path))
    scene = scene_factory(pipeline="tests.chaos.pipelines:stall_once").start(1)
    scene.feed_and_commit(4000)
    # One instance: the stall holds an open transaction. The bridge leaves (exit 3, naming the
    # step) before the transaction reaches its timeout; the supervisor restarts it, as a pod.
    faults.stall_step(scene, random.Random(14))
    verdict = scene.finish()
    assert verdict.records == scene.feeder.fed
    assert verdict.aborted_uncommitted > 0, "the stalled transaction must be aborted"


def test_rolling_restart_of_bridge_instances_under_load(scene_factory: MakeScene) -> None:
    scene = scene_factory().start(3)
    scene.feed_and_commit(3000)
    faults.rolling_bridge_restart(scene, random.Random(14))
    assert scene.finish().records == scene.feeder.fed
