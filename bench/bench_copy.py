"""``python -m bench.bench_copy``: a copy at full speed (issue 30, MirrorMaker's job): eos-bridge
exactly-once as a passthrough of bytes and of JSON, next to the hand-written at-least-once raw
copy (the practical limit of a Python loop); interleaved repetitions, medians. One cluster.

``--before DIR`` adds the bridge of another checkout (e.g. a worktree of an earlier commit)
on the bytes copy, in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.contenders import BY_KEY, Contender
from bench.data import seed_topic
from bench.kafka import create_topics
from bench.throughput import throughput_run
from devkit.kafka import LocalKafka

TOPIC = "bench-copy-in"


def runs(before: Path | None) -> dict[str, tuple[Contender, Path | None]]:
    """Label → (contender, the code it runs; None: this checkout)."""
    bridge = BY_KEY["bridge-eos"]
    chosen = {
        "bridge bytes": (replace(bridge, key="bridge-eos-bytes", value_format="bytes"), None),
        "bridge json": (replace(bridge, value_format="json"), None),
        "hand raw copy (ALOS)": (BY_KEY["raw-copy"], None),
    }
    if before is not None:
        chosen["bridge bytes, --before"] = (chosen["bridge bytes"][0], before)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout's bridge, on bytes")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-copy-"))
    cluster, bootstrap = None, os.environ.get("KAFKA_BOOTSTRAP")
    if not bootstrap:
        cluster = LocalKafka(workdir / "kafka", brokers=1)
        cluster.start()
        bootstrap = cluster.bootstrap
    try:
        create_topics(bootstrap, [TOPIC], args.partitions)
        seed_topic(bootstrap, TOPIC, args.records, 1000)
        chosen = runs(args.before)
        rates: dict[str, list[float]] = {label: [] for label in chosen}
        for rep in range(args.reps):
            order = list(chosen) if rep % 2 == 0 else list(chosen)[::-1]
            for label in order:
                contender, source = chosen[label]
                result = throughput_run(
                    contender, bootstrap=bootstrap, pipeline="copy", input_topic=TOPIC,
                    partitions=args.partitions, commit_interval=1.0, rep=rep, workdir=workdir,
                    timeout=600, source=source,
                )  # fmt: skip
                rates[label].append(result.records_per_s)
                print(
                    f"{label} rep {rep}: {result.records_per_s:,.0f} records/s, "
                    f"{result.cpu_s_per_million:.1f} µs CPU/record",
                    flush=True,
                )
        for label, values in rates.items():
            print(f"median {label}: {statistics.median(values):,.0f} records/s")
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
