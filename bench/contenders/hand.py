"""The hand-written confluent-kafka loops (the practical limit) and the raw copy loop (the
ceiling): consume batches, transform, produce, and every interval either flush + commit
(at-least-once) or commit the transaction with the input offsets in it (``--eos``).

librdkafka settings are its defaults plus what any such loop sets (manual commits,
read_committed input, idempotent or transactional producer) and the same consumer fetch tuning
as eos-bridge. Values are JSON (orjson) or, with ``--registry``, Avro in the Confluent wire
format (:mod:`bench.contenders.hand_avro`: one fastavro call per record each way, the least an
Avro loop does). State (P2 counts, P3 windows) lives in plain dicts: nothing is durable, which
is exactly why this is a limit and not an alternative.
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from app.kafka.defaults import CONSUMER_DEFAULTS
from bench.transforms import WINDOW_SECONDS, enrich, keep

FETCH = {
    k: v
    for k, v in CONSUMER_DEFAULTS.items()
    if k in ("fetch.wait.max.ms", "queued.min.messages", "fetch.queue.backoff.ms")
}

Emit = Callable[[bytes, bytes | None], None]
Handler = Callable[[list[Any], Emit], None]
Loads = Callable[[bytes], Any]
Dumps = Callable[[Any], bytes]


def p1(loads: Loads = orjson.loads, dumps: Dumps = orjson.dumps) -> Handler:
    def handle(messages: list[Any], emit: Emit) -> None:
        for m in messages:
            value = loads(m.value())
            if keep(value):
                emit(dumps(enrich(value)), m.key())

    return handle


def p2(loads: Loads = orjson.loads, dumps: Dumps = orjson.dumps) -> Handler:
    counts: dict[bytes, int] = {}

    def handle(messages: list[Any], emit: Emit) -> None:
        for m in messages:
            loads(m.value())  # every contender decodes its input
            key = m.key()
            count = counts[key] = counts.get(key, 0) + 1
            out = {
                "key": key.decode(), "count": count, "_source_topic": m.topic(),
                "_source_partition": m.partition(), "_source_offset": m.offset(),
            }  # fmt: skip
            emit(dumps(out), key)

    return handle


def p3(loads: Loads = orjson.loads, dumps: Dumps = orjson.dumps) -> Handler:
    size = WINDOW_SECONDS * 1000
    # partition -> window start -> key -> sum; partition -> stream time
    windows: dict[int, dict[int, dict[bytes, float]]] = {}
    stream_time: dict[int, int] = {}

    def handle(messages: list[Any], emit: Emit) -> None:
        for m in messages:
            value = loads(m.value())
            p, ts, key = m.partition(), m.timestamp()[1], m.key()
            now = stream_time[p] = max(ts, stream_time.get(p, ts))
            start = ts - ts % size
            if start + size <= now:
                continue  # late
            sums = windows.setdefault(p, {}).setdefault(start, {})
            sums[key] = sums.get(key, 0) + value["amount"]
            for closed in [s for s in windows[p] if s + size <= now]:
                for k, total in windows[p].pop(closed).items():
                    out = {"key": k.decode(), "start": closed, "end": closed + size, "value": total}
                    emit(dumps(out), k)

    return handle


def raw(messages: list[Any], emit: Emit) -> None:
    for m in messages:
        emit(m.value(), m.key())


class Commits:
    """At-least-once: flush the producer, then commit the consumer's offsets synchronously."""

    def __init__(self, consumer: Consumer, producer: Producer) -> None:
        self.consumer, self.producer = consumer, producer

    def seen(self, messages: list[Any]) -> None:
        """Note the batch's offsets (the consumer's own positions are what it commits)."""

    def commit(self) -> None:
        self.producer.flush()
        self.consumer.commit(asynchronous=False)


class Transactions(Commits):
    """Exactly-once: the outputs and the input offsets of an interval in one transaction
    (``send_offsets_to_transaction`` + ``commit_transaction``), a new one begun at once."""

    def __init__(self, consumer: Consumer, producer: Producer) -> None:
        super().__init__(consumer, producer)
        self.positions: dict[tuple[str, int], int] = {}
        producer.init_transactions()
        producer.begin_transaction()

    def seen(self, messages: list[Any]) -> None:
        positions = self.positions
        for m in messages:
            positions[m.topic(), m.partition()] = m.offset() + 1

    def commit(self) -> None:
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.positions.items()]
        self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata())
        self.producer.commit_transaction()
        self.positions.clear()
        self.producer.begin_transaction()


def clients(args: argparse.Namespace) -> tuple[Consumer, Producer, Commits]:
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            # The consumer fetch settings of eos-bridge (app/kafka/defaults.py): without them
            # librdkafka's 1 s fetch.queue.backoff.ms, not Python, sets the pace.
            **FETCH,
        }
    )
    producer_conf = {"bootstrap.servers": args.bootstrap, "enable.idempotence": True, "acks": "all"}
    if args.eos:
        producer_conf["transactional.id"] = f"{args.group}-hand"
        producer = Producer(producer_conf)
        return consumer, producer, Transactions(consumer, producer)
    producer = Producer(producer_conf)
    return consumer, producer, Commits(consumer, producer)


def handler(args: argparse.Namespace) -> Handler:
    if args.raw:
        return raw
    handlers: dict[str, Callable[[Loads, Dumps], Handler]] = {"p1": p1, "p2": p2, "p3": p3}
    if args.registry:
        from bench.contenders.hand_avro import from_registry  # only the Avro loop needs it

        avro = from_registry(args.registry, args.schema, args.output)
        return handlers[args.pipeline](avro.loads, avro.dumps)
    return handlers[args.pipeline](orjson.loads, orjson.dumps)


def run(args: argparse.Namespace) -> None:
    consumer, producer, commits = clients(args)
    handle = handler(args)
    topic, produce = args.output, producer.produce

    def emit(value: bytes, key: bytes | None) -> None:
        while True:
            try:
                produce(topic, value, key)
                return
            except BufferError:
                producer.poll(0.05)

    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer.subscribe([args.input])
    consumed, next_commit = 0, time.monotonic() + args.commit_interval
    while not stopping:
        messages = [m for m in consumer.consume(args.batch_size, 0.2) if m.error() is None]
        if messages:
            handle(messages, emit)
            commits.seen(messages)
            consumed += len(messages)
        producer.poll(0)
        if consumed and time.monotonic() >= next_commit:
            commits.commit()
            consumed, next_commit = 0, time.monotonic() + args.commit_interval
    if consumed:
        commits.commit()
    producer.flush()
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("--bootstrap", "--input", "--output", "--group", "--pipeline"):
        parser.add_argument(name, required=True)
    parser.add_argument("--commit-interval", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--raw", action="store_true", help="copy bytes, no parsing")
    parser.add_argument("--eos", action="store_true", help="transactional: exactly once")
    parser.add_argument("--registry", help="Avro values: the Schema Registry URL")
    parser.add_argument("--schema", help="Avro values: the output schema (.avsc)")
    args = parser.parse_args()
    if args.registry and not args.schema:
        parser.error("--registry needs --schema (the output's Avro schema)")
    run(args)


if __name__ == "__main__":
    main()
