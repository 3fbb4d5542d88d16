"""Time to the first micro-batch of ``spark_jobs.stream``, for one or more source trees.

Each run starts the streaming job as a fresh process (its own JVM) on a new table and
checkpoint and reports the seconds from the process start until Spark commits micro-batch 0
of the aggregates query (``<checkpoint>/aggregates/commits/0`` appears); the job is then
stopped with SIGTERM. Runs of the trees alternate, so a change in the machine's load hits
both sides alike::

    git archive main | tar -x -C /tmp/main-tree
    python -m bench.spark_first_batch --tree before=/tmp/main-tree --tree after=. --runs 2

A local broker is started unless ``KAFKA_BOOTSTRAP`` is set.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from confluent_kafka import Producer

from app.kafka.topics import create_topic
from devkit.kafka import LocalKafka

RECORDS = 2_000


def produce(bootstrap: str, topic: str, records: int) -> None:
    """``records`` bridge-like JSON records in one committed transaction."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-seed", "linger.ms": 20}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    t0 = int(time.time() * 1000)
    for i in range(records):
        key = f"user-{i % 7}"
        doc = {"id": f"o-{i}", "key": key, "amount": i % 50, "ts": t0 + i * 100}
        producer.produce(topic, json.dumps(doc).encode(), key=key.encode())
    producer.commit_transaction(60)


def time_first_batch(tree: Path, bootstrap: str, topic: str, work: Path, timeout: float) -> float:
    """Seconds from the job's process start to the commit of its first micro-batch."""
    checkpoint = work / "checkpoint"
    args = [
        sys.executable, "-m", "spark_jobs.stream", "--bootstrap", bootstrap, "--topic", topic,
        "--table", str(work / "table"), "--checkpoint", str(checkpoint),
        "--trigger", "10 seconds",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    committed = checkpoint / "aggregates" / "commits" / "0"
    with (work / "job.log").open("wb") as log:
        start = time.monotonic()
        proc = subprocess.Popen(
            args, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            while not committed.exists():
                if proc.poll() is not None or time.monotonic() - start > timeout:
                    raise RuntimeError(f"no first micro-batch; see {work / 'job.log'}")
                time.sleep(0.05)
            return time.monotonic() - start
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the job stops its queries and exits), then the group if anything is left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(120)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def broker(directory: Path) -> Iterator[str]:
    """``$KAFKA_BOOTSTRAP``, or a local single broker for the bench's lifetime."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    with LocalKafka(directory / "kafka") as cluster:
        yield cluster.bootstrap


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.spark_first_batch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tree", action="append", required=True, metavar="NAME=PATH", help="a source tree"
    )
    parser.add_argument("--runs", type=int, default=2, help="runs per tree (alternating)")
    parser.add_argument("--records", type=int, default=RECORDS, help="records in the topic")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    trees = [
        (name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)
    ]
    results: dict[str, list[float]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory(prefix="spark-first-batch-") as tmp, broker(Path(tmp)) as bs:
        topic = "first-batch"
        create_topic(bs, topic, partitions=2)
        produce(bs, topic, args.records)
        for run in range(args.runs):
            for name, tree in trees:
                work = Path(tmp) / f"{name}-{run}"
                work.mkdir()
                load = os.getloadavg()[0]
                seconds = time_first_batch(tree, bs, topic, work, args.timeout)
                results[name].append(seconds)
                print(f"{name} run {run + 1}: {seconds:.1f} s (load {load:.1f})", flush=True)
    for name, values in results.items():
        print(f"{name}: " + ", ".join(f"{v:.1f}" for v in values) + " s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
