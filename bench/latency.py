"""End-to-end latency under a steady load (P1 only).

The harness produces ``rate`` records/s into a fresh input topic while the contender runs, and
a ``read_committed`` reader tails the output. Per output record:

* visible latency = the reader's wall clock on receipt - the input record's timestamp
  (carried through as the ``ts`` field): what a downstream read_committed consumer waits,
  transaction commit included;
* append latency = the output record's broker append time (LogAppendTime) - the input
  timestamp: when the record was written, before its transaction committed.

Samples from the first ``warmup`` seconds after the first output are dropped.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from bench.contenders import REPO, Contender, Job
from bench.data import make_value
from bench.kafka import create_topics, delete_topics_of
from bench.process import ContenderProcess
from bench.transforms import keep


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


class _Load(threading.Thread):
    """Produces ``rate`` records/s with ``ts`` = now until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int, keys: int) -> None:
        super().__init__(daemon=True)
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self._topic, self._rate, self._keys = topic, rate, keys
        self.stopped = threading.Event()
        self.passing = 0

    def run(self) -> None:
        rng = random.Random(11)
        started, sent = time.monotonic(), 0
        while not self.stopped.is_set():
            due = int((time.monotonic() - started) * self._rate)
            while sent < due:
                now = int(time.time() * 1000)
                user = rng.randrange(self._keys)
                value = make_value(sent, user, rng, now)
                self.passing += keep(orjson.loads(value))
                self._producer.produce(
                    self._topic, value, f"user-{user:06d}".encode(), timestamp=now
                )
                sent += 1
            self._producer.poll(0)
            time.sleep(0.005)
        self._producer.flush(30)


class _Reader(threading.Thread):
    """Tails the output with read_committed; records (input ts, visible ms, append ms)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench-latency-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.samples: list[tuple[int, float, float]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            msg = self._consumer.poll(0.05)
            if msg is None or msg.error() is not None:
                continue
            now = time.time() * 1000
            ts = orjson.loads(msg.value())["ts"]
            self.samples.append((ts, now - ts, msg.timestamp()[1] - ts))
        self._consumer.close()


def latency_run(
    contender: Contender,
    *,
    bootstrap: str,
    partitions: int,
    commit_interval: float,
    rep: int,
    workdir: Path,
    rate: int,
    duration: float,
    warmup: float = 2.0,
    keys: int = 100_000,
    source: Path | None = None,
) -> dict[str, Any]:
    """Measure ``contender`` on P1 under ``rate`` records/s for ``duration`` seconds."""
    uid = f"lat-{contender.key}-{rep}-{uuid.uuid4().hex[:6]}"
    job = Job(
        bootstrap, "p1", f"bench-in-{uid}", f"bench-out-{uid}", f"bench-{uid}",
        commit_interval, workdir / f"state-{uid}", source or REPO,
    )  # fmt: skip
    create_topics(bootstrap, [job.input_topic], partitions)
    create_topics(
        bootstrap, [job.output_topic], partitions, **{"message.timestamp.type": "LogAppendTime"}
    )
    load = _Load(bootstrap, job.input_topic, rate, keys)
    reader = _Reader(bootstrap, job.output_topic, partitions)
    reader.start()
    proc = ContenderProcess(contender, job, workdir / f"{uid}.log")
    load.start()
    try:
        first = _until(lambda: bool(reader.samples), proc, 120, "first output")
        window = (first + warmup) * 1000, (first + warmup + duration) * 1000
        time.sleep(warmup + duration)
        load.stopped.set()
        load.join(30)
        _until(lambda: len(reader.samples) >= load.passing, proc, 60, "all outputs read")
        proc.stop()
    finally:
        load.stopped.set()
        reader.stopped.set()
        if proc.alive():
            proc.stop(timeout=10)
        reader.join(10)
        delete_topics_of(bootstrap, uid)
    measured = [s for s in reader.samples if window[0] <= s[0] < window[1]]
    if not measured:
        raise RuntimeError(f"{contender.key}: no latency samples in the measured window")
    visible = [s[1] for s in measured]
    append = [s[2] for s in measured]
    return {
        "contender": contender.key,
        "rep": rep,
        "rate": rate,
        "samples": len(measured),
        "visible_p50_ms": percentile(visible, 50),
        "visible_p99_ms": percentile(visible, 99),
        "append_p50_ms": percentile(append, 50),
        "append_p99_ms": percentile(append, 99),
    }


def _until(condition: Any, proc: ContenderProcess, timeout: float, what: str) -> float:
    """Wait for ``condition``; returns the wall-clock time (s) it became true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if not proc.alive():
            raise RuntimeError(f"exited with {proc.proc.returncode} before {what}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {timeout:.0f}s:\n{proc.tail()}")
        time.sleep(0.05)
    return time.time()
