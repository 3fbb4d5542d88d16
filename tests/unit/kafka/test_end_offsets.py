"""The end offset of a partition: an answer below 0 is not an end."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from app.kafka.topics import high_watermark


class _Consumer:
    """Answers the scripted end offsets in turn, then the last one for good."""

    def __init__(self, *answers: int) -> None:
        self.answers, self.asked = list(answers), 0

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        self.asked += 1
        return 0, self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_an_end_offset_answered_as_invalid_is_asked_again() -> None:
    consumer = _Consumer(-1001, -1001, 40)
    assert high_watermark(consumer, TopicPartition("out", 3), timeout=30.0) == 40  # type: ignore[arg-type]
    assert consumer.asked == 3


def test_an_empty_partition_ends_at_0() -> None:
    assert high_watermark(_Consumer(0), TopicPartition("out", 0), timeout=30.0) == 0  # type: ignore[arg-type]


def test_an_end_offset_never_answered_names_the_partition() -> None:
    with pytest.raises(TimeoutError, match=r"out\[3\]: no end offset \(answered -1001\)"):
        high_watermark(_Consumer(-1001), TopicPartition("out", 3), timeout=0.0)  # type: ignore[arg-type]
