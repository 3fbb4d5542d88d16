"""P2's state cost per record as the input grows, without a broker (issue 13, point 3).

``python -m bench.state_cost --records 4000000`` counts the bench's P2 input (100k keys,
key → partition by hash, 4 partitions, batches of 2000) through the production count step and
state backend, checkpointing every ``--checkpoint`` records (≈ one commit interval of a
~100k records/s run) with a fake changelog producer. Every ``--segment`` records it prints CPU
seconds per million records of that segment: the whole process (RocksDB's background threads
included), the count step, and the checkpoint (RocksDB ``WriteBatch`` into the memtable, read
cache update). A cost that grows from segment to segment is a cost that grows with the input.
CPU seconds, not wall time: on a shared machine they move less, but they still move.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import zlib
from pathlib import Path

from app.kafka.errors import consumer_retriable
from app.pipeline.record import Row
from app.pipeline.stateful import Count
from app.pipeline.steps import StepContext
from app.sink.collector import RecordCollector
from app.state.manager import RocksDBState
from bench.bench_recovery import _Producer
from changelog.recovery import Restorer

PARTITIONS = 4
BATCH = 2000


def _backend(root: Path, cache_mb: int) -> RocksDBState:
    backend = RocksDBState(
        root, {("count", "t"): "changelog"}, cache_mb << 20,
        Restorer(lambda: None, retriable=consumer_retriable),
            lambda tps: {tp: (0, 0) for tp in tps},
    )  # fmt: skip
    tps = [("t", p) for p in range(PARTITIONS)]
    backend.assign(tps)
    backend.recover({tp: -1001 for tp in tps}, 1.0)
    return backend


def run(
    records: int, keys: int, checkpoint: int, segment: int, cache_mb: int = 64
) -> list[dict[str, float]]:
    """Count ``records`` inputs; one dict of CPU s per million records per ``segment``."""
    rng = random.Random(7)
    names = [f"user-{u:06d}".encode() for u in range(keys)]
    partition_of = [zlib.crc32(k) % PARTITIONS for k in names]  # like the bench's input
    segments: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as root:
        backend, step, producer = (
            _backend(Path(root), cache_mb),
            Count(),
            RecordCollector(_Producer()),
        )
        offsets: list[int] = [0] * PARTITIONS
        pending: list[list[Row]] = [[] for _ in range(PARTITIONS)]
        done = since = 0
        next_segment = segment
        spent = {"step": 0.0, "checkpoint": 0.0}
        mark = time.process_time()
        while done < records:
            u = rng.randrange(keys)
            p = partition_of[u]
            pending[p].append(Row({}, names[u], None, "t", p, offsets[p], 0))
            offsets[p] += 1
            if len(pending[p]) < BATCH:
                continue
            t = time.thread_time()
            step(pending[p], StepContext(state=backend))
            spent["step"] += time.thread_time() - t
            pending[p] = []
            done, since = done + BATCH, since + BATCH
            if since >= checkpoint or backend.needs_checkpoint():
                t = time.thread_time()
                positions = {("t", q): offsets[q] for q in range(PARTITIONS)}
                backend.produce_changelogs(producer, positions)
                backend.after_commit()
                spent["checkpoint"] += time.thread_time() - t
                since = 0
            if done >= next_segment:
                now = time.process_time()
                scale = 1e6 / (done - next_segment + segment)
                segments.append(
                    {"records": done, "process": (now - mark) * scale}
                    | {k: v * scale for k, v in spent.items()}
                )
                spent = dict.fromkeys(spent, 0.0)
                mark, next_segment = now, done + segment
        backend.close()
    return segments


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.state_cost", description=__doc__)
    p.add_argument("--records", type=int, default=4_000_000)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--checkpoint", type=int, default=100_000, help="records per checkpoint")
    p.add_argument("--segment", type=int, default=500_000, help="records per printed line")
    args = p.parse_args(argv)
    print("records   CPU s per million records: process (all threads) | step | checkpoint")
    for s in run(args.records, args.keys, args.checkpoint, args.segment):
        print(
            f"{s['records'] / 1e6:5.2f}M   {s['process']:6.2f} | {s['step']:6.2f} | "
            f"{s['checkpoint']:6.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
