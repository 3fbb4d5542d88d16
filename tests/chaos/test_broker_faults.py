"""Broker faults while the bridge runs: SIGKILL + restart of the broker that matters, a rolling
restart of all three, and a broker paused past the request timeout.

Each fault lands inside an open transaction (the scene feeds until one is seen), the live
read_committed reader runs throughout, and the oracle runs once everything healed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tests.chaos import faults
from tests.chaos.scene import Scene
from tests.support.chaos import Rig, java_hash_partition

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

MakeScene = Callable[..., Scene]


def _target(rig: Rig, scene: Scene, role: str) -> int:
    assert not rig.unclean_election_enabled()
    # The group coordinator the broker reports is the leader of the group's offsets partition;
    # the same rule (Utils.abs(hashCode) % partitions) names the transaction coordinator.
    offsets_partition = java_hash_partition(scene.group, 10)
    assert rig.group_coordinator(scene.group) == rig.leader("__consumer_offsets", offsets_partition)
    if role == "partition leader":
        return rig.leader(scene.out, 0)
    if role == "transaction coordinator":
        return rig.transaction_coordinator(scene.transactional_ids[0])
    return rig.group_coordinator(scene.group)


# The coordinators' SIGKILL is CI's in tests/integration/test_coordinator_failover.py (the broker
# that is both, killed twice under the supervised bridge); here they run in make test-long-chaos.
@pytest.mark.parametrize(
    "role",
    [
        "partition leader",
        pytest.param("transaction coordinator", marks=pytest.mark.long_chaos),
        pytest.param("group coordinator", marks=pytest.mark.long_chaos),
    ],
)
def test_sigkill_and_restart_broker(rig: Rig, scene_factory: MakeScene, role: str) -> None:
    scene = scene_factory().start()
    scene.feed_and_commit(4000)
    faults.kill_and_restart(scene, _target(rig, scene, role))
    assert scene.finish().records == scene.feeder.fed


def test_rolling_restart_of_all_brokers(scene_factory: MakeScene) -> None:
    scene = scene_factory().start()
    scene.feed_and_commit(2000)
    faults.rolling_broker_restart(scene, random.Random(14))
    assert scene.finish().records == scene.feeder.fed


def test_broker_paused_past_request_timeout(rig: Rig, scene_factory: MakeScene) -> None:
    scene = scene_factory().start()
    scene.feed_and_commit(4000)
    faults.pause_and_resume(scene, rig.transaction_coordinator(scene.transactional_ids[0]))
    assert scene.finish().records == scene.feeder.fed
