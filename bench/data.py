"""The benchmark input: ~200-byte JSON records, seeded once per input topic per run.

``kv`` input (P1, P2): keys ``user-<n>`` over 100k users. ``win`` input (P3): 1000 keys and
record timestamps one millisecond apart (event time), so 10 s windows close as data flows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

from bench.transforms import keep

COUNTRIES = ("DE", "FR", "NL", "PL", "ES", "IT", "SE", "US", "GB", "BR")
DEVICES = ("ios", "android", "web", "pos")


@dataclass(slots=True, frozen=True)
class InputSpec:
    """One seeded input topic."""

    topic: str
    records: int
    keys: int
    expected_p1: int  # records that pass the P1 filter


def make_value(i: int, user: int, rng: random.Random, ts: int) -> bytes:
    """One ~200-byte JSON record."""
    return orjson.dumps(
        {
            "id": f"r{i:09d}",
            "user": f"user-{user:06d}",
            "amount": round(rng.uniform(0.0, 100.0), 2),
            "currency": "EUR",
            "country": COUNTRIES[user % len(COUNTRIES)],
            "device": DEVICES[i % len(DEVICES)],
            "ts": ts,
            "items": 1 + i % 7,
            "note": "benchmark record padded to about two hundred bytes of json",
        }
    )


class ValuePool:
    """:func:`make_value` records at a fraction of its cost, for a load producer that must keep
    up with a high offered rate on the machine it measures (bench.latency): users and amounts
    drawn once into a pool of ``size`` entries (cycled; 2^18 covers ~92 % of 100k users), each
    record then one bytes ``%`` format of its id and send time. Same bytes as :func:`make_value`
    for the same id, user, amount and time."""

    _TEMPLATE = (
        b'{"id":"r%09d","user":"user-%06d","amount":%s,"currency":"EUR","country":"%s",'
        b'"device":"%s","ts":%d,"items":%d,"note":"benchmark record padded to about two '
        b'hundred bytes of json"}'
    )
    _DEVICES = tuple(d.encode() for d in DEVICES)

    def __init__(self, keys: int, rng: random.Random, size: int = 1 << 18) -> None:
        self._mask = size - 1
        if size & self._mask:
            raise ValueError(f"size {size} is not a power of two")
        self.users = [rng.randrange(keys) for _ in range(size)]
        self.amounts = [round(rng.uniform(0.0, 100.0), 2) for _ in range(size)]
        self._amounts = [orjson.dumps(a) for a in self.amounts]
        self._countries = [COUNTRIES[u % len(COUNTRIES)].encode() for u in self.users]
        self.keys = [f"user-{u:06d}".encode() for u in self.users]

    def key(self, i: int) -> bytes:
        return self.keys[i & self._mask]

    def value(self, i: int, ts: int) -> bytes:
        j = i & self._mask
        return self._TEMPLATE % (
            i, self.users[j], self._amounts[j], self._countries[j],
            self._DEVICES[i % len(DEVICES)], ts, 1 + i % 7,
        )  # fmt: skip


def records(n: int, keys: int, seed: int, base_ts: int) -> Iterator[tuple[bytes, bytes, int]]:
    """``(key, value, timestamp_ms)``; timestamps ``base_ts + i`` (1 ms apart)."""
    rng = random.Random(seed)
    for i in range(n):
        user = rng.randrange(keys)
        ts = base_ts + i
        yield f"user-{user:06d}".encode(), make_value(i, user, rng, ts), ts


def avro_encoder(registry_url: str, topic: str) -> Callable[[bytes], bytes]:
    """A JSON value → the same record in Avro (``bench/schemas/input.avsc``), written by
    confluent-kafka's own serializer, which registers ``<topic>-value``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = (Path(__file__).parent / "schemas" / "input.avsc").read_text()
    write = AvroSerializer(SchemaRegistryClient({"url": registry_url}), schema)
    ctx = SerializationContext(topic, MessageField.VALUE)

    def encode(value: bytes) -> bytes:
        out: bytes = write(orjson.loads(value), ctx)
        return out

    return encode


def seed_topic(
    bootstrap: str,
    topic: str,
    n: int,
    keys: int,
    seed: int = 7,
    encode: Callable[[bytes], bytes] | None = None,
) -> InputSpec:
    """Produce ``n`` records (idempotent, acks=all); timestamps end about now. ``encode``
    turns each JSON value into the bytes produced (the Avro twin: :func:`avro_encoder`)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 50,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 200000,
        }
    )
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    passing = 0
    base_ts = int(time.time() * 1000) - n - 60_000
    for key, value, ts in records(n, keys, seed, base_ts):
        passing += keep(orjson.loads(value))
        if encode is not None:
            value = encode(value)
        while True:
            try:
                producer.produce(topic, value, key, timestamp=ts, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0 or errors:
        raise RuntimeError(f"seeding {topic!r} failed: {errors[:3] or 'flush timed out'}")
    return InputSpec(topic, n, keys, passing)
