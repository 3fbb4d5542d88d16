"""The rebalancer and the repairs under ``group_protocol=consumer`` (KIP-848): each callback
changes only the partitions it names, with the incremental calls.

The fake consumer refuses ``assign()`` under the incremental protocol as librdkafka does
(``_STATE``), so each test fails when the eager call is put back.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, TopicPartition

from tests.unit.engine.test_checkpoint_and_rebalance import Rig
from tests.unit.fakes import kafka_exc

THREE = [("in", 0), ("in", 1), ("in", 2)]


def _tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("in", p) for p in partitions]


def _rig() -> Rig:
    rig = Rig(incremental=True, assignment=THREE)
    rig.consumer.committed_offsets = {key: 5 for key in THREE}
    rig.consumer.committed_offsets[("in", 3)] = 7
    return rig


def _assigned(rig: Rig) -> list[tuple[str, int]]:
    return sorted((tp.topic, tp.partition) for tp in rig.consumer.assignment())


def test_an_added_partition_is_assigned_alone_and_the_others_are_left_as_they_are() -> None:
    rig = _rig()
    rig.callback_with("on_assign", _tps(3))
    rig.rebalancer.raise_pending()  # an eager assign() is refused: it would be raised here
    assert _assigned(rig) == [*THREE, ("in", 3)]
    assert rig.consumer.seeks == [] and rig.consumer.paused == []
    assert rig.health.readiness() == (True, "running, 4 partitions")


def test_a_revoke_commits_and_unassigns_only_the_revoked_partitions() -> None:
    rig = _rig()
    rig.checkpoint.record(3, started=0.0)
    rig.callback_with("on_revoke", _tps(2))
    rig.rebalancer.raise_pending()
    assert "commit_transaction" in rig.producer.calls and rig.state.revoked == [("in", 2)]
    assert _assigned(rig) == [("in", 0), ("in", 1)]
    assert rig.consumer.seeks == []  # those that stay are not rewound
    assert rig.health.readiness() == (True, "running, 2 partitions")  # not "rebalancing"


def test_a_revoke_whose_commit_aborts_rewinds_the_partitions_that_stay() -> None:
    rig = _rig()
    rig.producer.fail["commit_transaction"] = [
        kafka_exc(KafkaError._STATE, txn_requires_abort=True)
    ]
    rig.checkpoint.record(3, started=0.0)
    rig.callback_with("on_revoke", _tps(2))
    rig.rebalancer.raise_pending()
    assert "abort_transaction" in rig.producer.calls
    # Their uncommitted work was dropped with the abort: back to the committed offsets.
    assert {(t, p) for t, p, _ in rig.consumer.seeks} >= {("in", 0), ("in", 1)}
    assert _assigned(rig) == [("in", 0), ("in", 1)]


def test_lost_partitions_go_and_the_others_are_rewound_to_their_committed_offsets() -> None:
    rig = _rig()
    rig.callback_with("on_lost", _tps(0))
    rig.rebalancer.raise_pending()
    assert "abort_transaction" in rig.producer.calls and rig.state.lost_partitions == [("in", 0)]
    assert _assigned(rig) == [("in", 1), ("in", 2)]
    assert sorted(rig.consumer.seeks) == [("in", 1, 5), ("in", 2, 5)]
    assert rig.aborts("partitions_lost") == 1


def test_the_offsets_repair_assigns_again_with_the_incremental_calls() -> None:
    rig = _rig()
    rig.repair.reassign_at_committed()
    assert "assign" not in rig.consumer.calls
    assert rig.consumer.calls[-2:] == ["incremental_unassign", "incremental_assign"]
    assert sorted(rig.consumer.assigned) == [("in", 0, 5), ("in", 1, 5), ("in", 2, 5)]
    assert _assigned(rig) == THREE
