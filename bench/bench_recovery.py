"""State recovery benchmark: changelog records/s into RocksDB, and peak RSS under the cache cap.

::

    python -m bench.bench_recovery                       # starts its own local broker
    KAFKA_BOOTSTRAP=127.0.0.1:29092 python -m bench.bench_recovery --records 1000000

Phases (each measured phase runs in its own process, so its peak RSS is its own):

1. seed: a changelog topic written the way checkpoints write it (transactions of
   ``--checkpoint`` records, so commit markers sit between them; Quix-format headers);
2. bare: a read_committed consumer with the restore consumer's settings reads the changelog
   and drops every record (``consume(RESTORE_BATCH)``, headers and keys touched) — the
   ceiling a restore can reach on this machine, in this run;
   restore: a fresh state directory restored by the production code path (``open_state`` →
   ``assign`` → ``recover`` slices) — records/s, its ratio to the bare read and peak RSS;
   once with every record applied, once with the newest half skipped by the filter rule;
3. cache: a count over ``--keys`` distinct keys through the write-behind cache with
   ``state_cache_max_bytes`` = each ``--cache-mb`` value, checkpointing whenever the cap says so
   (fake producer) — peak RSS per cap.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from app.config import BridgeSettings
from app.engine.start import open_state
from app.kafka.errors import consumer_retriable
from app.kafka.topics import create_topic
from app.pipeline import Pipeline
from app.pipeline.record import Row
from app.pipeline.stateful import Count
from app.pipeline.steps import StepContext
from app.sink.collector import RecordCollector
from app.state.manager import RocksDBState
from changelog.format import changelog_headers
from changelog.naming import changelog_topic_name
from changelog.recovery import RESTORE_BATCH, RESTORE_CONSUMER_DEFAULTS, Restorer
from devkit.kafka import LocalKafka

GROUP = "bench-recovery"


def _settings(bootstrap: str, topic: str, state_dir: Path, cache_bytes: int) -> BridgeSettings:
    return BridgeSettings(
        bootstrap_servers=bootstrap, input_topics=[topic], output_topic=f"{topic}.out",
        group_id=GROUP, state_dir=state_dir, state_cache_max_bytes=cache_bytes,
    )  # fmt: skip


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def seed(bootstrap: str, topic: str, records: int, keys: int, value_bytes: int, every: int) -> None:
    """Input topic + changelog with ``records`` records in transactions of ``every``."""
    create_topic(bootstrap, topic, 1)
    settings = _settings(bootstrap, topic, Path(tempfile.mkdtemp()), 1 << 26)
    open_state(settings, Pipeline().count()).close()  # creates the changelog topic
    changelog = changelog_topic_name(GROUP, topic, "count")
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"seed-{topic}", "linger.ms": 20,
         "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000}
    )  # fmt: skip
    producer.init_transactions(30)
    value = b"v" * value_bytes
    for start in range(0, records, every):
        producer.begin_transaction()
        headers = changelog_headers("default", {topic: start + every - 1})
        for i in range(start, min(start + every, records)):
            key = b"key-%08d" % (i % keys)
            while True:
                try:
                    producer.produce(changelog, value, key, partition=0, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(60)


def bare(bootstrap: str, topic: str) -> dict[str, Any]:
    """Read the changelog to its end and drop it: no decoding, no RocksDB."""
    changelog = changelog_topic_name(GROUP, topic, "count")
    consumer = Consumer({
        **RESTORE_CONSUMER_DEFAULTS, "bootstrap.servers": bootstrap, "group.id": f"{GROUP}.bare",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    end = consumer.get_watermark_offsets(TopicPartition(changelog, 0), timeout=30)[1]
    consumer.assign([TopicPartition(changelog, 0, 0)])
    started, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
    position = 0
    while position < end:
        for msg in consumer.consume(RESTORE_BATCH, 0.05):
            msg.headers(), msg.key(), msg.value()  # what restore reads of each record
        position = consumer.position([TopicPartition(changelog, 0)])[0].offset
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    main = time.thread_time() - main
    consumer.close()
    return {
        "offsets": end,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "main_thread_cpu_seconds": main,
        "peak_rss_mb": _peak_rss_mb(),
    }


def restore(bootstrap: str, topic: str, committed: int) -> dict[str, Any]:
    """Restore into a fresh state dir; returns the figures of this process."""
    with tempfile.TemporaryDirectory() as state_dir:
        backend = open_state(
            _settings(bootstrap, topic, Path(state_dir), 1 << 26), Pipeline().count()
        )
        assert isinstance(backend, RocksDBState)
        tp = (topic, 0)
        backend.assign([tp])
        started, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
        backend.recover({tp: committed}, 0.0)  # opens the store, plans the task
        planned = backend.progress()
        while not backend.recover({tp: committed}, 1.0):
            pass
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        main = time.thread_time() - main
        offsets = planned[0].target - planned[0].position if planned else 0
        backend.close()
    # CPU seconds next to wall time: the machine is shared. The Python thread is the
    # bottleneck (librdkafka fetches and RocksDB compacts on their own threads): its CPU time
    # is what one dedicated core would take.
    return {
        "offsets": offsets,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "main_thread_cpu_seconds": main,
        "peak_rss_mb": _peak_rss_mb(),
    }


@dataclass(slots=True, frozen=True)
class _Delivered:
    """The parts of a delivery report the changelog writer reads."""

    _topic: str
    _partition: int
    _offset: int

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class _Producer:
    """Delivers every changelog record at once with increasing offsets (no broker)."""

    def __init__(self) -> None:
        self.offset = 0

    def produce(
        self, topic: str, value: Any, key: Any, partition: int = -1, callback: Any = None,
        on_delivery: Any = None, timestamp: int = 0, headers: Any = None,
    ) -> None:  # fmt: skip
        self.offset += 1
        report = callback or on_delivery  # the writer asks for a partition's last record only
        if report is not None:
            report(None, _Delivered(topic, partition, self.offset))


def cache(keys: int, cap_mb: int) -> dict[str, Any]:
    """Count over ``keys`` distinct keys twice through the capped write-behind cache."""

    with tempfile.TemporaryDirectory() as root:
        backend = RocksDBState(
            Path(root), {("count", "t"): "changelog"}, cap_mb << 20,
            Restorer(lambda: None, retriable=consumer_retriable),
            lambda tps: {tp: (0, 0) for tp in tps},
        )  # fmt: skip
        backend.assign([("t", 0)])
        backend.recover({("t", 0): -1001}, 1.0)
        step, producer, checkpoints = Count(), RecordCollector(_Producer()), 0
        started = time.perf_counter()
        for start in range(0, 2 * keys, 2000):
            rows = [
                Row({}, b"key-%08d" % (i % keys), None, "t", 0, i, 0)
                for i in range(start, start + 2000)
            ]
            step(rows, StepContext(state=backend))
            if backend.needs_checkpoint():
                backend.produce_changelogs(producer, {("t", 0): start + 2000})
                backend.after_commit()
                checkpoints += 1
        seconds = time.perf_counter() - started
        backend.close()
    return {
        "cap_mb": cap_mb,
        "records": 2 * keys,
        "checkpoints": checkpoints,
        "records_per_s": 2 * keys / seconds,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_recovery", "--phase", *args],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _rate_line(label: str, r: dict[str, Any]) -> str:
    return (
        f"{label}: {r['offsets']:,} offsets in {r['seconds']:.2f}s wall = "
        f"{r['offsets'] / r['seconds']:,.0f} records/s; Python thread "
        f"{r['main_thread_cpu_seconds']:.2f} CPU-s = "
        f"{r['offsets'] / r['main_thread_cpu_seconds']:,.0f} records/s on a core of its own "
        f"(all threads {r['cpu_seconds']:.2f} CPU-s); peak RSS {r['peak_rss_mb']:.0f} MB"
    )


def _report(args: argparse.Namespace, bootstrap: str) -> None:
    topic = f"bench-recovery-{int(time.time())}"
    t0 = time.perf_counter()
    seed(bootstrap, topic, args.records, args.keys, args.value_bytes, args.checkpoint)
    print(f"seeded {args.records:,} changelog records in {time.perf_counter() - t0:.1f}s")
    print(f"load average before measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    ceiling = _child("bare", bootstrap, topic)
    print(_rate_line("bare read_committed read (the ceiling)", ceiling))
    cases = (("all applied", args.records), ("newest half skipped", args.records // 2))
    for label, committed in cases:
        r = _child("restore", bootstrap, topic, str(committed))
        ratio = (r["offsets"] / r["seconds"]) / (ceiling["offsets"] / ceiling["seconds"])
        print(f"{_rate_line(f'restore ({label})', r)}; {ratio:.2f}x the bare read")
    for cap in args.cache_mb:
        r = _child("cache", str(args.cache_keys), str(cap))
        print(
            f"cache cap {cap} MB: {r['records']:,} updates over {args.cache_keys:,} keys, "
            f"{r['checkpoints']} forced checkpoints, {r['records_per_s']:,.0f} records/s, "
            f"peak RSS {r['peak_rss_mb']:.0f} MB"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=32)
    parser.add_argument("--checkpoint", type=int, default=10_000, help="records per transaction")
    parser.add_argument("--cache-mb", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--cache-keys", type=int, default=1_000_000)
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        kind, *rest = args.phase
        if kind == "restore":
            result = restore(rest[0], rest[1], int(rest[2]))
        elif kind == "bare":
            result = bare(rest[0], rest[1])
        else:
            result = cache(int(rest[0]), int(rest[1]))
        print(json.dumps(result))
        return 0
    cluster = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    if not bootstrap:
        cluster = LocalKafka(Path(tempfile.mkdtemp(prefix="bench-kafka-")), brokers=1)
        cluster.start()
        bootstrap = cluster.bootstrap
    try:
        _report(args, bootstrap)
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
