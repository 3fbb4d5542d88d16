"""Issue 32's first hole: one record with a 1 MiB key among 2,000 good ones. Its output, its
dead letter and (for a count) its state key are all larger than their topics take; the record
must end in the DLQ with its class, cut down to fit, and every good record must be committed:
no abort loop, no stall."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from tests.support.bridge import base_settings, json_records, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

BIG = 2 * 1024 * 1024  # the input topic takes the 1 MiB key; the output and DLQ topics do not


def _seed_with_one_huge_key(kafka: KafkaFixture, src: str) -> bytes:
    values, keys = json_records(2_000)
    huge = b"k" * (1 << 20)
    producer = kafka.producer(**{"message.max.bytes": BIG + 4096})
    for i, (value, key) in enumerate(zip(values, keys, strict=True)):
        if i == 1_000:
            producer.produce(src, orjson.dumps({"id": "huge", "amount": 1}), huge, partition=0)
        producer.produce(src, value, key, partition=i % 2)
    assert producer.flush(60) == 0
    return huge


@pytest.mark.parametrize(
    ("pipeline", "error_class"),
    [
        ("tests.pipelines:tagged", "OutputTooLarge"),
        ("tests.state_pipelines:counting", "StateKeyTooLarge"),
    ],
)
def test_a_one_mib_key_is_a_dead_letter_and_nothing_stalls(
    kafka: KafkaFixture,
    bridges,  # type: ignore[no-untyped-def]
    pipeline: str,
    error_class: str,
) -> None:
    src = kafka.create_topic(kafka.unique("in"), 2, {"max.message.bytes": str(BIG)})
    out = kafka.create_topic(kafka.unique("out"), 2)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    _seed_with_one_huge_key(kafka, src)
    settings = base_settings(kafka, src, out, dlq, pipeline=pipeline)
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    outputs = kafka.read_all(out)
    if error_class == "OutputTooLarge":
        ids = Counter(orjson.loads(r.value)["id"] for r in outputs)
        assert ids == Counter({f"r{i}": 1 for i in range(2_000)})
    else:
        assert len(outputs) == 2_000 and sum(1 for r in outputs if len(r.key or b"") > 1000) == 0
    (letter,) = kafka.read_all(dlq)
    headers = dict(letter.headers or [])
    assert headers["eos.dlq.error.class"] == error_class.encode()
    assert headers["eos.dlq.source.offset"] == b"500"
    assert letter.key is None and headers["eos.dlq.key.dropped.bytes"] == str(1 << 20).encode()
    aborts = [line for line in bridge.logs().splitlines() if "aborting transaction" in line]
    assert aborts == [], aborts[:3]
