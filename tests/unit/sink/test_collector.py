"""The one writer (app.sink.collector) over a fake producer, like Kafka Streams'
RecordCollectorTest:
one back-off on a full queue for every kind of record, one latch, one mapping of refusals."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from app.errors import CheckpointAborted, RecordTooLarge
from app.ops.metrics import Metrics
from app.pipeline import Pipeline
from app.pipeline.fusion import FusedBatch
from app.pipeline.steps import fuse
from app.serde import formats
from app.sink.collector import RecordCollector
from tests.unit.fakes import FakeMessage, FakeProducer, kafka_exc, produce_keywords

JSON, RAW = formats(), formats("bytes")


class Reporting(FakeProducer):
    """Keeps each record's own delivery callback; ``deliver`` serves them like a flush."""

    def __init__(self) -> None:
        super().__init__()
        self.callbacks: list[tuple[Any, tuple[str, int]]] = []
        self.polls = 0

    def produce(
        self, topic: str, value: Any = None, key: Any = None, *args: Any, **kw: Any
    ) -> None:
        kw = {**produce_keywords(args), **kw}
        super().produce(topic, value, key, **kw)
        if "on_delivery" in kw:
            self.callbacks.append((kw["on_delivery"], (topic, kw.get("partition", 0))))

    def poll(self, timeout: float = 0) -> int:
        self.polls += 1
        return 0

    def deliver(self, err: Any = None) -> None:
        for callback, (topic, partition) in self.callbacks:
            offset = len(self.produced) - 1
            callback(err, FakeMessage(topic, partition, offset, value=b"v", key=b"k"))
        self.callbacks.clear()


def identity() -> FusedBatch:
    """A fused pipeline (app.pipeline.fusion) that writes its input objects back."""
    fused = fuse(Pipeline().filter(lambda v: True).steps, JSON, 1000)
    assert fused is not None
    return fused


def _send_fused(collector: RecordCollector, fused: FusedBatch, messages: list[Any]) -> int:
    """As the loop runs a fused pipeline through the writer's hooks (app.engine.loop)."""
    produce, room = collector.hooks()
    try:
        done, produced = fused(messages, produce, room, "out")
    except KafkaException as exc:
        raise collector.refusal("out", exc) from exc
    collector.produced(produced)
    return done


def full_once(producer: FakeProducer) -> None:
    producer.fail["produce"].append(BufferError("Local: Queue full"))


def test_every_kind_of_record_waits_for_room_in_a_full_queue() -> None:
    producer = Reporting()
    collector = RecordCollector(producer)
    sends = [
        lambda: collector.send("out", b"1", b"k", None),
        lambda: _send_fused(collector, identity(), [FakeMessage(value=b'{"n":2}')]),
        lambda: collector.send_dead_letter("dlq", b"3", b"k", []),
        lambda: collector.send_run("cl", 0, {b"k": b"4"}, [], lambda *_: None),
    ]
    for send in sends:
        full_once(producer)
        send()
    assert [v for _, v, _ in producer.produced] == [b"1", b'{"n":2}', b"3", b"4"]  # each once
    assert producer.calls.count("produce") == 8 and producer.polls >= 4  # served, then again


def test_a_size_refusal_is_the_records_own_and_anything_else_aborts() -> None:
    producer = Reporting()
    collector = RecordCollector(producer)
    producer.fail["produce"].append(kafka_exc(KafkaError.MSG_SIZE_TOO_LARGE))
    with pytest.raises(RecordTooLarge, match="produce to 'out' failed: MSG_SIZE_TOO_LARGE"):
        collector.send("out", b"x" * 10, None, None)
    producer.fail["produce"].append(kafka_exc(KafkaError._STATE))
    with pytest.raises(CheckpointAborted, match=r"changelog produce to cl\[0\] failed") as aborted:
        collector.send_run("cl", 0, {b"k": b"v"}, [], lambda *_: None)
    assert not isinstance(aborted.value, RecordTooLarge)


def test_one_latch_for_output_and_changelog_deliveries() -> None:
    producer = Reporting()
    collector = RecordCollector(producer)
    offsets: list[tuple[str, int, int]] = []
    collector.send_run("cl", 2, {b"a": b"1", b"b": None}, [], lambda *tp: offsets.append(tp))
    assert [bool(c) for c, _ in producer.callbacks] == [True]  # the run's last record only
    producer.deliver()
    assert offsets == [("cl", 2, 1)]
    collector.flush(1.0)
    collector.send_run("cl", 2, {b"c": b"1"}, [], lambda *tp: offsets.append(tp))
    producer.deliver(KafkaError(KafkaError._MSG_TIMED_OUT))
    timed_out = FakeMessage("out", 0, 5, value=b"v", key=b"k")
    collector.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), timed_out)
    with pytest.raises(CheckpointAborted, match=r"2 delivery error.*changelog cl\[2\]"):
        collector.flush(1.0)
    collector.flush(1.0)  # the latch started afresh


def test_late_reports_of_an_aborted_transaction_do_not_fail_the_next() -> None:
    producer = Reporting()
    collector = RecordCollector(producer)
    collector.send_run("cl", 0, {b"k": b"v"}, [], lambda *_: None)
    collector.reset()  # the abort
    producer.deliver(KafkaError(KafkaError._PURGE_QUEUE))  # purged, reported late
    collector.flush(1.0)


def test_sent_records_are_counted_once_per_batch_and_not_when_aborted() -> None:
    metrics = Metrics()
    collector = RecordCollector(Reporting(), metrics)

    def sample(name: str) -> float:
        return metrics.registry.get_sample_value(name) or 0.0

    collector.send("out", b"1", None, None)
    collector.send("out", b"2", None, None)
    assert sample("eos_bridge_output_records_total") == 0  # not per record
    collector.end_batch()
    assert _send_fused(collector, identity(), [FakeMessage(), FakeMessage()]) == 2
    collector.send_dead_letter("dlq", b"4", None, [])
    collector.send_run("cl", 0, {b"k": b"5"}, [], lambda *_: None)  # not an output record
    assert sample("eos_bridge_output_records_total") == 4
    assert sample("eos_bridge_produced_dead_letter_records_total") == 1
    collector.send("out", b"6", None, None)
    collector.reset()  # aborted before its batch ended
    collector.end_batch()
    assert sample("eos_bridge_output_records_total") == 4
