"""``python -m bench.bench_routes``: eos-bridge exactly-once routing every record to an existing
topic vs to a missing one (each record dead-lettered), interleaved repetitions, medians.

Issue 12, acceptance 2: a route to a missing topic must run within 2x of one to an existing
topic (it used to cost two metadata requests per record and outlive its transaction).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench.contenders import BY_KEY
from bench.data import seed_topic
from bench.kafka import create_topics
from bench.throughput import throughput_run
from devkit.kafka import LocalKafka

PIPELINES = ("route_existing", "route_missing")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-routes-"))
    cluster = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    if not bootstrap:
        cluster = LocalKafka(workdir / "kafka", brokers=1)
        cluster.start()
        bootstrap = cluster.bootstrap
    try:
        create_topics(bootstrap, ["bench-routes-in"], args.partitions)
        seed_topic(bootstrap, "bench-routes-in", args.records, 1000)
        rates: dict[str, list[float]] = {p: [] for p in PIPELINES}
        for rep in range(args.reps):
            for pipeline in PIPELINES if rep % 2 == 0 else PIPELINES[::-1]:
                result = throughput_run(
                    BY_KEY["bridge-eos"], bootstrap=bootstrap, pipeline=pipeline,
                    input_topic="bench-routes-in", partitions=args.partitions,
                    commit_interval=1.0, rep=rep, workdir=workdir, timeout=600,
                )  # fmt: skip
                rates[pipeline].append(result.records_per_s)
                print(f"{pipeline} rep {rep}: {result.records_per_s:,.0f} records/s", flush=True)
        medians = {p: statistics.median(r) for p, r in rates.items()}
        ratio = medians["route_existing"] / medians["route_missing"]
        print(
            f"median records/s: existing {medians['route_existing']:,.0f}, "
            f"missing {medians['route_missing']:,.0f} (existing/missing = {ratio:.2f})"
        )
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
