"""End-to-end latency under an offered load (P1 and P2), any contender.

A load process produces into a fresh input topic: a trickle (20 records/s) until the contender's
first output is visible, then ``rate`` records/s for ``warmup + duration + tail`` seconds. Each
record carries its send time (``ts`` in the value, also the record timestamp), read from one
:class:`bench.latency_stats.HostClock` shared with the reader. A ``read_committed`` reader
tails the output and notes when each output record became visible to it (raw bytes kept, parsed
after the run, so the reader keeps up with any rate). After the load stops, the harness waits
until the contender's group has committed the input end offsets and the reader has read the
output to its end, reads the input back, and matches inputs to outputs
(:func:`bench.latency_stats.summarise`). Inputs sent in the ``duration`` window after the
``warmup`` are measured; visible latency = visible to the reader - sent.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from app.kafka.topics import end_offsets
from bench.contenders import REPO, Contender, Job
from bench.data import ValuePool
from bench.kafka import Probe, create_topics, delete_topics_of
from bench.latency_stats import HostClock, Seen, Sent, cdf, paced, summarise, visible_times
from bench.process import ContenderProcess
from bench.transforms import keep

TRICKLE_PER_S = 20
MAX_LAG_S = 0.1  # the load producer drops schedule it is further behind: achieved ≤ offered
TAIL_S = 1.0  # load beyond the window: the window's last records ride a normal transaction


def _produce_load(
    bootstrap: str, topic: str, rate: int, keys: int, clock: HostClock, go: Any, stop: Any
) -> None:
    """The load process: trickle until ``go``, then ``rate`` records/s until ``stop``."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 2,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": True,
        }
    )
    # Values from a pool (bench.data.ValuePool): ~1 µs less per record than make_value, CPU
    # the contender measured on the same cores gets instead.
    pool, sent = ValuePool(keys, random.Random(11)), 0
    started: float | None = None
    base = 0
    while not stop.is_set():
        now = time.monotonic()
        if started is None and go.is_set():
            started, base = now, sent
        if started is None:
            due = sent + 1
        else:
            base, due = paced(base, now - started, rate, sent, MAX_LAG_S)
        while sent < due:
            ts = int(clock.ms())
            try:
                producer.produce(topic, pool.value(sent, ts), pool.key(sent), timestamp=ts)
            except BufferError:
                producer.poll(0.01)
                break
            sent += 1
        producer.poll(0)
        time.sleep(1 / TRICKLE_PER_S if started is None else 0.002)
    producer.flush(60)


class _Reader(threading.Thread):
    """Tails the output with read_committed; keeps (partition, value, visible ms) raw."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, clock: HostClock) -> None:
        super().__init__(daemon=True)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-latency-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 5,
                "fetch.queue.backoff.ms": 1,
            }
        )
        self._tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        self._consumer.assign(self._tps)
        self._clock = clock
        self.received: list[tuple[bytes, float]] = []
        self.positions: dict[int, int] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        append, clock = self.received.append, self._clock
        while not self.stopped.is_set():
            batch = self._consumer.consume(10_000, 0.005)
            now = clock.ms()
            for m in batch:
                if m.error() is None:
                    append((m.value(), now))
            if not batch:
                self.positions = {
                    tp.partition: tp.offset for tp in self._consumer.position(self._tps)
                }
        self._consumer.close()

    def read_to(self, ends: dict[int, int]) -> bool:
        """Whether the reader has passed ``ends`` (every output partition)."""
        pos = self.positions
        return all(pos.get(p, -1) >= e for p, e in ends.items() if e > 0)


def latency_run(
    contender: Contender,
    *,
    bootstrap: str,
    pipeline: str,
    partitions: int,
    commit_interval: float,
    rep: int,
    workdir: Path,
    rate: int,
    duration: float,
    warmup: float = 3.0,
    keys: int = 100_000,
    source: Path | None = None,
    curve: bool = False,
) -> dict[str, Any]:
    """Measure ``contender`` on ``pipeline`` (p1 | p2) under ``rate`` records/s."""
    uid = f"lat-{pipeline}-{contender.key}-{rep}-{uuid.uuid4().hex[:6]}"
    job = Job(
        bootstrap, pipeline, f"bench-in-{uid}", f"bench-out-{uid}", f"bench-{uid}",
        commit_interval, workdir / f"state-{uid}", source or REPO,
    )  # fmt: skip
    create_topics(bootstrap, [job.input_topic, job.output_topic], partitions)
    clock = HostClock.now_anchored()
    ctx = multiprocessing.get_context("spawn")
    go, stop = ctx.Event(), ctx.Event()
    load = ctx.Process(
        target=_produce_load,
        args=(bootstrap, job.input_topic, rate, keys, clock, go, stop),
        daemon=True,
    )
    reader = _Reader(bootstrap, job.output_topic, partitions, clock)
    reader.start()
    load.start()
    proc = ContenderProcess(contender, job, workdir / f"{uid}.log")
    try:
        _until(lambda: bool(reader.received), proc, 180, "first output")
        go_mono = time.monotonic()
        go.set()
        window = clock.ms(go_mono + warmup), clock.ms(go_mono + warmup + duration)
        _until(lambda: time.monotonic() >= go_mono + warmup + duration + TAIL_S, proc, 1e9, "")
        stop.set()
        load.join(90)
        drained = _drain(bootstrap, job, reader, proc, timeout=120 + 10 * commit_interval)
        proc.stop()
    finally:
        stop.set()
        reader.stopped.set()
        if proc.alive():
            proc.stop(timeout=10)
        if load.is_alive():
            load.kill()
        reader.join(10)
    try:
        sent, sent_all = read_inputs(bootstrap, job.input_topic, pipeline)
    finally:
        delete_topics_of(bootstrap, uid)
    seen = parse_outputs(reader.received, pipeline)
    figures = summarise(sent, seen, window)
    in_window = sum(1 for t in sent_all if window[0] <= t < window[1])
    result: dict[str, Any] = {
        "pipeline": pipeline, "contender": contender.key, "rep": rep,
        "commit_interval": commit_interval, "rate": rate,
        "achieved_rate": in_window / duration, "drained": drained, **figures,
    }  # fmt: skip
    if curve:
        result["cdf"] = _curve(sent, seen, window)
    return result


def _curve(sent: list[Sent], seen: list[Seen], window: tuple[float, float]) -> list[list[float]]:
    measured = [s for s in sent if window[0] <= s.sent_ms < window[1]]
    lat = [
        float("inf") if v is None else v - s.sent_ms
        for s, v in zip(measured, visible_times(measured, seen), strict=True)
    ]
    return [[x, y] for x, y in cdf(lat)]


def _drain(
    bootstrap: str, job: Job, reader: _Reader, proc: ContenderProcess, timeout: float
) -> bool:
    """Wait until the group committed the input end offsets and the reader read the output to
    its end; False if that did not happen within ``timeout`` (what was not seen stays unseen)."""
    probe = Probe(bootstrap, job.group, job.input_topic, job.output_topic)
    deadline = time.monotonic() + timeout
    try:
        while not probe.caught_up():
            if not proc.alive() or time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        ends = end_offsets(bootstrap, job.output_topic)
        while not reader.read_to(ends):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True
    finally:
        probe.close()


def read_inputs(bootstrap: str, topic: str, pipeline: str) -> tuple[list[Sent], list[float]]:
    """Every input record as a :class:`Sent` (P1: only those the filter keeps), and the send
    time of every input record (the offered load)."""
    ends = {p: e for p, e in end_offsets(bootstrap, topic).items() if e > 0}
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-latency-inputs",
         "enable.auto.commit": False}
    )  # fmt: skip
    sent: list[Sent] = []
    sent_all: list[float] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        pending = dict(ends)
        while pending:
            for m in consumer.consume(10_000, 1.0):
                if m.error() is not None:
                    continue
                value = orjson.loads(m.value())
                sent_all.append(value["ts"])
                if pipeline == "p2":
                    sent.append(Sent(m.key().decode(), m.offset(), value["ts"]))
                elif keep(value):
                    sent.append(Sent(value["id"], 0, value["ts"]))
                if m.offset() + 1 >= pending.get(m.partition(), 0):
                    pending.pop(m.partition(), None)
    finally:
        consumer.close()
    return sent, sent_all


def parse_outputs(received: list[tuple[bytes, float]], pipeline: str) -> list[Seen]:
    """Output records as :class:`Seen`: P1 by input id, P2 by key and source offset."""
    seen: list[Seen] = []
    for raw, visible in received:
        value = orjson.loads(raw)
        if pipeline == "p2":
            seen.append(Seen(value["key"], value["_source_offset"], visible))
        else:
            seen.append(Seen(value["id"], 0, visible))
    return seen


def _until(condition: Any, proc: ContenderProcess, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if not proc.alive():
            raise RuntimeError(f"exited with {proc.proc.returncode} before {what}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {timeout:.0f}s:\n{proc.tail()}")
        time.sleep(0.05)
