"""Committed offsets from the group: a partition's own error is not "never committed"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from app.errors import KafkaFatalError
from app.offsets.group import GroupOffsets
from tests.unit.fakes import RecordingGuard


class _Consumer:
    """Answers each committed() call with the next scripted {partition: offset or error}."""

    def __init__(self, *answers: dict[int, int | KafkaError]) -> None:
        self.answers = list(answers)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[Any]:
        answer, out = self.answers.pop(0), []
        for tp in partitions:
            got = answer[tp.partition]
            failed = isinstance(got, KafkaError)
            # librdkafka puts a partition's error in that partition, with offset -1001
            out.append(
                SimpleNamespace(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=-1001 if failed else got,
                    error=got if failed else None,
                )
            )
        return out


PARTITIONS = [TopicPartition("in", 0), TopicPartition("in", 1)]


def test_a_partition_answered_with_a_settling_error_is_asked_again() -> None:
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    consumer = _Consumer({0: 12, 1: loading}, {0: 12, 1: 30})
    offsets = GroupOffsets(consumer, RecordingGuard(), timeout=30.0)  # type: ignore[arg-type]
    assert [(tp.partition, tp.offset) for tp in offsets.committed(PARTITIONS)] == [(0, 12), (1, 30)]
    assert not consumer.answers


def test_a_partition_answered_with_an_error_is_not_taken_for_never_committed() -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    consumer = _Consumer({0: 12, 1: denied})
    offsets = GroupOffsets(consumer, RecordingGuard(), timeout=30.0)  # type: ignore[arg-type]
    with pytest.raises(KafkaFatalError, match=r"committed offset of in\[1\]: TOPIC_AUTHORIZATION"):
        offsets.committed(PARTITIONS)


def test_a_partition_never_answered_is_one_fatal_line_naming_it() -> None:
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    consumer = _Consumer({0: 12, 1: loading})
    offsets = GroupOffsets(consumer, RecordingGuard(), timeout=0.0)  # type: ignore[arg-type]
    with pytest.raises(KafkaFatalError, match=r"committed offset of in\[1\] not readable within"):
        offsets.committed(PARTITIONS)
