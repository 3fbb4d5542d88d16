"""The hand-written at-least-once confluent-kafka loop (the practical limit) and the raw copy
loop (the ceiling): consume batches, transform, produce, flush + commit every interval.

librdkafka settings are its defaults plus what any such loop sets (manual commits,
read_committed input, idempotent producer) and the same consumer fetch tuning as eos-bridge.
State (P2 counts, P3 windows) lives in plain dicts: nothing is durable, which is exactly why
this is a limit and not an alternative.
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer

from app.kafka.defaults import CONSUMER_DEFAULTS
from bench.transforms import WINDOW_SECONDS, enrich, keep

FETCH = {
    k: v
    for k, v in CONSUMER_DEFAULTS.items()
    if k in ("fetch.wait.max.ms", "queued.min.messages", "fetch.queue.backoff.ms")
}

Emit = Callable[[bytes, bytes | None], None]
Handler = Callable[[list[Any], Emit], None]


def p1(messages: list[Any], emit: Emit) -> None:
    loads, dumps = orjson.loads, orjson.dumps
    for m in messages:
        value = loads(m.value())
        if keep(value):
            emit(dumps(enrich(value)), m.key())


def p2() -> Handler:
    counts: dict[bytes, int] = {}

    def handle(messages: list[Any], emit: Emit) -> None:
        for m in messages:
            orjson.loads(m.value())  # every contender decodes its input
            key = m.key()
            count = counts[key] = counts.get(key, 0) + 1
            out = {
                "key": key.decode(), "count": count, "_source_topic": m.topic(),
                "_source_partition": m.partition(), "_source_offset": m.offset(),
            }  # fmt: skip
            emit(orjson.dumps(out), key)

    return handle


def p3() -> Handler:
    size = WINDOW_SECONDS * 1000
    # partition -> window start -> key -> sum; partition -> stream time
    windows: dict[int, dict[int, dict[bytes, float]]] = {}
    stream_time: dict[int, int] = {}

    def handle(messages: list[Any], emit: Emit) -> None:
        for m in messages:
            value = orjson.loads(m.value())
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
                    emit(orjson.dumps(out), k)

    return handle


def raw(messages: list[Any], emit: Emit) -> None:
    for m in messages:
        emit(m.value(), m.key())


def run(args: argparse.Namespace) -> None:
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
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
        }
    )
    handlers: dict[str, Callable[[], Handler]] = {"p1": lambda: p1, "p2": p2, "p3": p3}
    handle = raw if args.raw else handlers[args.pipeline]()
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
            consumed += len(messages)
        producer.poll(0)
        if consumed and time.monotonic() >= next_commit:
            producer.flush()
            consumer.commit(asynchronous=False)
            consumed, next_commit = 0, time.monotonic() + args.commit_interval
    producer.flush()
    if consumed:
        consumer.commit(asynchronous=False)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("--bootstrap", "--input", "--output", "--group", "--pipeline"):
        parser.add_argument(name, required=True)
    parser.add_argument("--commit-interval", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--raw", action="store_true", help="copy bytes, no parsing")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
