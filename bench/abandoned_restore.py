"""Does a full restore abandoned by a rebalance leave memory behind, and does it add up?

::

    python -m bench.abandoned_restore --records 3000000 --rounds 6 [--background]

Soak attempts 6, 11 and 13 each saw one bridge process keep 30-50 MiB more RSS after a
rebalance that assigned it partitions it had no state for and took them back within a second.
This replays that in one process, ``--rounds`` times: assign a partition whose changelog holds
``--records`` records to a fresh store, restore for ``--budget`` seconds (the production path:
``open_state`` → ``assign`` → ``recover``), revoke it, delete its store (the next round
restores from offset 0 again), ``malloc_trim(0)`` as the bridge's trimmer does, and print RSS
and the resident size of glibc's heaps. With ``--background`` a consumer and a producer run
beside it, as the bridge's own clients do, so their threads allocate in the same arenas.
Each configuration runs in a child process with ``MALLOC_ARENA_MAX=2`` (as the image sets it).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from app.engine.start import open_state
from app.pipeline import Pipeline
from bench.bench_recovery import GROUP, _settings, seed
from changelog.naming import changelog_topic_name
from devkit.kafka import LocalKafka


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _heaps() -> str:
    """glibc's heaps with more than 8 MiB resident: the main heap and the arenas' 64 MiB maps."""
    out, mapping = [], ("", 0)
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$", line)
            if m:
                mapping = (m[3] or "anon", (int(m[2], 16) - int(m[1], 16)) >> 20)
            elif line.startswith("Rss:") and mapping[0] in ("anon", "[heap]"):
                rss = int(line.split()[1]) >> 10
                if rss > 8:
                    out.append(f"{mapping[0]} {mapping[1]} MiB mapped / {rss} resident")
    return "; ".join(out)


def _background(bootstrap: str, changelog: str, out: str, stop: threading.Event) -> None:
    """A steady consumer and producer beside the restore (~2,000 records/s)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{GROUP}.background"})
    consumer.assign([TopicPartition(changelog, 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    while not stop.is_set():
        for m in consumer.consume(20, 0.01):
            while True:
                try:
                    producer.produce(out, m.value(), m.key())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    producer.flush(10)
    consumer.close()


def rounds(bootstrap: str, topic: str, records: int, n: int, budget: float, bg: bool) -> None:
    """The child: ``n`` abandoned restores in this process."""
    trim = ctypes.CDLL("libc.so.6").malloc_trim
    state_dir = Path(tempfile.mkdtemp(prefix="abandoned-restore-"))
    backend = open_state(_settings(bootstrap, topic, state_dir, 1 << 26), Pipeline().count())
    tp = (topic, 0)
    stop = threading.Event()
    if bg:
        changelog = changelog_topic_name(GROUP, topic, "count")
        args = (bootstrap, changelog, f"{topic}.background", stop)
        threading.Thread(target=_background, args=args, daemon=True).start()
        time.sleep(5)
    trim(0)
    print(f"background {'on' if bg else 'off'}; start: RSS {_rss_mib():.0f} MiB; {_heaps()}")
    for i in range(n):
        backend.assign([tp])
        started = time.monotonic()
        backend.recover({tp: records}, 0.0)
        while time.monotonic() - started < budget:
            if backend.recover({tp: records}, min(0.2, budget)):
                break
        left = sum(p.target - p.position for p in backend.progress())
        during = _rss_mib()
        backend.revoke([tp])
        for store in [p for p in state_dir.rglob("0") if p.is_dir()]:
            shutil.rmtree(store)  # the next round restores from offset 0 again
        gc.collect()
        time.sleep(1.0)
        trim(0)
        print(
            f"round {i}: RSS {during:.0f} MiB restoring, {_rss_mib():.0f} MiB after the revoke "
            f"and malloc_trim; {left:,} offsets were left; {_heaps()}",
            flush=True,
        )
    stop.set()
    backend.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--budget", type=float, default=0.9, help="seconds restored per round")
    parser.add_argument("--background", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)  # bootstrap, topic
    args = parser.parse_args(argv)
    if args.child:
        rounds(*args.child, args.records, args.rounds, args.budget, args.background)
        return 0
    cluster = LocalKafka(Path(tempfile.mkdtemp(prefix="bench-kafka-")), brokers=1)
    cluster.start()
    try:
        topic = f"abandoned-restore-{int(time.time())}"
        seed(cluster.bootstrap, topic, args.records, 100_000, 32, 10_000)
        child = [sys.executable, "-m", "bench.abandoned_restore", "--child", cluster.bootstrap,
                 topic, "--records", str(args.records), "--rounds", str(args.rounds),
                 "--budget", str(args.budget)]  # fmt: skip
        if args.background:
            child.append("--background")
        env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
        subprocess.run(child, env=env, check=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
