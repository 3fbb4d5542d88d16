"""Transactional, compressed input: an upstream producer (lz4 and zstd) commits, aborts and
leaves transactions empty. Only committed input is bridged, and the group's lag ends at 0 even
though the input ends with transaction markers rather than records."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import orjson
import pytest
from confluent_kafka import Producer

from tests.chaos.scene import Scene
from tests.support.chaos import record_id_of, wait_committed

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

MakeScene = Callable[..., Scene]


def test_transactional_compressed_input_with_aborts_and_empty_transactions(
    scene_factory: MakeScene,
) -> None:
    scene = scene_factory(records=0).start()
    kafka = scene.kafka
    producers = [_upstream_producer(scene, codec) for codec in ("lz4", "zstd")]
    committed = aborted = 0
    for txn in range(24):
        producer = producers[txn % 2]
        producer.begin_transaction()
        outcome = txn % 4  # 0, 1: committed records; 2: aborted records; 3: empty
        ids = (
            [] if outcome == 3 else [f"{'r' if outcome < 2 else 'x'}{txn}-{i}" for i in range(500)]
        )
        for rid in ids:
            key = f"user-{zlib.crc32(rid.encode()) % 50}".encode()
            producer.produce(scene.src, orjson.dumps({"id": rid, "pad": "p" * 64}), key)
        if outcome == 2:
            # Flush first: an abort purges what librdkafka has not sent yet, and the aborted
            # records must be in the log for the test to mean anything.
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
            aborted += len(ids)
        else:
            producer.commit_transaction(30)
            committed += len(ids)
        if txn % 6 == 5:  # a phase: the bridge must catch up across the markers so far
            wait_committed(kafka, scene.sup, scene.group, scene.src)
    assert kafka.end_offsets(scene.src) == kafka.end_offsets(scene.src, read_committed=False)
    # The aborted records are in the input log (read_uncommitted sees them); only the
    # committed ones may come out.
    assert len(kafka.read_all(scene.src, read_committed=False)) == committed + aborted
    verdict = scene.finish()
    assert verdict.records == committed == 12 * 500
    bridged = {record_id_of(r.value)[0] for r in kafka.read_all(scene.out)}
    assert bridged == {"r"}, "aborted upstream records were bridged"


def _upstream_producer(scene: Scene, codec: str) -> Producer:
    producer = scene.kafka.producer(**{
        "transactional.id": scene.kafka.unique("upstream"), "compression.type": codec,
        "linger.ms": 20,
    })  # fmt: skip
    producer.init_transactions(30)
    return producer
