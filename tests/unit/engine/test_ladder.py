"""The one reaction ladder, at its seams: a fake transaction owner and repair record what the
ladder orders, so each exception class is checked against its one reaction, and the loop's
and the revoke path's reactions are the same by construction."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from app.engine.ladder import Ladder
from app.errors import (
    CheckpointAborted,
    KafkaFatalError,
    OffsetsUnfetched,
    PartitionsMigrated,
    ProducerFenced,
    RecordError,
    StateCorrupted,
)
from app.ops.metrics import Metrics
from app.sink.refusals import Refusals
from tests.unit.fakes import kafka_exc


class Owner:
    """Records what the ladder asks of the transaction owner."""

    def __init__(self) -> None:
        self.did: list[tuple[str, bool, bool]] = []

    def abort(self, reason: str, *, rewind: bool = True) -> None:
        self.did.append(("abort", rewind, True))

    def recreate(self, reason: str, *, rewind: bool = True, counted: bool = True) -> None:
        self.did.append(("recreate", rewind, counted))


class Repair:
    def __init__(self) -> None:
        self.did: list[Any] = []

    def reassign_at_committed(self) -> None:
        self.did.append("reassign")

    def restore_again(self, partitions: list[tuple[str, int]]) -> None:
        self.did.append(("restore", partitions))


class Rig:
    def __init__(self, refused: bool = False) -> None:
        self.owner, self.repair, self.metrics = Owner(), Repair(), Metrics()
        self.refusals = Refusals()
        if refused:
            self.refusals.note(kafka_exc(KafkaError.MSG_SIZE_TOO_LARGE), "out", b"k", b"v")
        owner: Any = self.owner
        repair: Any = self.repair
        self.ladder = Ladder(owner, self.refusals, self.metrics, repair)

    def aborts(self, label: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "eos_bridge_transaction_aborts_total", {"reason": label}
        )
        return value or 0.0


@pytest.mark.parametrize("rewind", [True, False])
def test_a_refused_record_gets_a_new_producer_on_the_loop_and_the_revoke_path(
    rewind: bool,
) -> None:
    rig = Rig(refused=True)
    assert rig.refusals.refused_in_txn
    rig.ladder.react(CheckpointAborted("commit failed", "commit_failed"), rewind=rewind)
    assert rig.owner.did == [("recreate", rewind, False)]  # not counted as a twin
    assert rig.aborts("record_refused") == 1


@pytest.mark.parametrize(
    ("exc", "did", "label"),
    [
        (CheckpointAborted("delivery failed", "abortable"), ("abort", True, True), "abortable"),
        (ProducerFenced("fenced"), ("recreate", True, True), "producer_recreated"),
        (PartitionsMigrated("moved"), ("abort", True, True), "partitions_migrated"),
        (kafka_exc(KafkaError._FENCED, fatal=True), ("recreate", True, True), "producer_recreated"),
    ],
)
def test_each_class_has_its_reaction_and_its_label(exc: Exception, did: Any, label: str) -> None:
    rig = Rig()
    rig.ladder.react(exc)
    assert rig.owner.did == [did]
    assert rig.aborts(label) == 1


def test_offsets_unfetched_aborts_without_rewind_and_reassigns() -> None:
    rig = Rig()
    rig.ladder.react(OffsetsUnfetched("consumer: NOT_COORDINATOR"))
    assert rig.owner.did == [("abort", False, True)]
    assert rig.repair.did == ["reassign"]
    assert rig.aborts("offsets_unfetched") == 1


def test_corrupted_state_of_known_partitions_is_restored_else_fatal() -> None:
    rig = Rig()
    rig.ladder.react(StateCorrupted("bad store", [("in", 0)]))
    assert rig.repair.did == [("restore", [("in", 0)])]
    assert rig.aborts("state_corrupted") == 1
    with pytest.raises(KafkaFatalError, match="local state corrupted"):
        rig.ladder.react(StateCorrupted("bad store"))


@pytest.mark.parametrize("exc", [KafkaFatalError("x"), RecordError("y")])
def test_what_nothing_in_process_repairs_is_raised(exc: Exception) -> None:
    rig = Rig()
    with pytest.raises(type(exc)):
        rig.ladder.react(exc)
    assert rig.owner.did == []


def test_at_close_a_failed_commit_is_logged_anything_worse_raised() -> None:
    rig = Rig()
    rig.ladder.react_at_close(CheckpointAborted("x"))
    rig.ladder.react_at_close(kafka_exc(KafkaError._TRANSPORT))
    with pytest.raises(KafkaFatalError):
        rig.ladder.react_at_close(KafkaFatalError("unknown outcome"))
    assert rig.owner.did == []
