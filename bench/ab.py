"""``python -m bench.ab --baseline REF``: the bridge at an earlier commit against the working
tree, in one run on one broker, repetitions interleaved (A B, B A, ...).

Answers "did this change make the single-cluster path slower?" without a quiet machine: both
sides are the same Python process shape under the same load, so their ratio holds where ratios
to a multi-threaded JVM peer move by tens of percent. Writes ``bench/results/ab-<ref>.md``.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

from bench.cli import INPUT_KEYS, INPUTS, log, snapshot
from bench.contenders import BY_KEY, REPO, Contender, Job
from bench.data import seed_topic
from bench.kafka import create_topics
from bench.process import settle
from bench.throughput import throughput_run
from devkit.kafka import LocalKafka

_PACKAGES = ("app", "changelog", "spark_jobs", "devkit", "bench")


@dataclass(slots=True, frozen=True)
class Side:
    """One side of the comparison: a name and the code it runs."""

    name: str
    source: Path


@dataclass(slots=True, frozen=True)
class EarlierEntry(Contender):
    """A bridge contender run from code older than ``python -m app`` (it had ``app.cli``)."""

    def command(self, job: Job) -> tuple[list[str], dict[str, str]]:
        argv, env = Contender.command(self, job)
        if argv[1:3] == ["-m", "app"] and not (job.source / "app" / "__main__.py").exists():
            argv[1:3] = ["-m", "app.cli"]
        return argv, env


def baseline_snapshot(ref: str, target: Path) -> Path:
    """The packages as they were at ``ref`` (``git archive``), extracted under ``target``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, *_PACKAGES],
        cwd=REPO, capture_output=True, check=True,
    ).stdout  # fmt: skip
    target.mkdir(parents=True)
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


Figures = dict[tuple[str, str, str, int], float]  # (pipeline, contender, side, repetition)


def ratio_rows(rates: Figures, new: str, old: str, fmt: str = ",.0f") -> list[str]:
    """Markdown rows: per (pipeline, contender) the median figure of each side (records/s, or
    CPU µs per record) and the median of the per-repetition ratios new / old."""
    rows = []
    keys = sorted({(p, c) for p, c, _, _ in rates})
    for pipeline, contender in keys:
        reps = sorted({r for p, c, _, r in rates if (p, c) == (pipeline, contender)})
        pairs = [
            (rates[pipeline, contender, new, r], rates[pipeline, contender, old, r])
            for r in reps
            if (pipeline, contender, new, r) in rates and (pipeline, contender, old, r) in rates
        ]
        if not pairs:
            continue
        per_rep = [n / o for n, o in pairs]
        rows.append(
            f"| {pipeline} | {BY_KEY[contender].label} "
            f"| {statistics.median(o for _, o in pairs):{fmt}} "
            f"| {statistics.median(n for n, _ in pairs):{fmt}} "
            f"| {statistics.median(per_rep):.3f} | {', '.join(f'{x:.2f}' for x in per_rep)} |"
        )
    return rows


def _fields(c: Contender) -> dict[str, object]:
    return {name: getattr(c, name) for name in Contender.__dataclass_fields__}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    p.add_argument("--baseline", required=True, help="git ref of the earlier code")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--commit-interval", type=float, default=1.0)
    p.add_argument("--pipelines", default="p1,p2")
    p.add_argument("--contenders", default="bridge-eos,bridge-eos-spec")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    return p.parse_args(argv)


def run(args: argparse.Namespace, workdir: Path) -> tuple[Figures, Figures]:
    """records/s and CPU µs per record (all the process's threads), per (pipeline,
    contender, side, repetition)."""
    sides = [
        Side("working tree", snapshot(workdir / "new")),
        Side(args.baseline, baseline_snapshot(args.baseline, workdir / "old")),
    ]
    contenders = [EarlierEntry(**_fields(BY_KEY[k.strip()])) for k in args.contenders.split(",")]
    pipelines = [p.strip() for p in args.pipelines.split(",")]
    kafka = LocalKafka(workdir / "kafka", brokers=1)
    kafka.start()
    rates: Figures = {}
    cpus: Figures = {}
    try:
        for topic in sorted({INPUTS[p] for p in pipelines}):
            create_topics(kafka.bootstrap, [topic], args.partitions)
            seed_topic(kafka.bootstrap, topic, args.records, INPUT_KEYS[topic])
        broker_pid = kafka.brokers[0].pid
        assert broker_pid is not None  # started above
        for rep in range(-1, args.reps):  # rep -1: the uncounted warm-up of a fresh broker
            order = sides if rep % 2 == 0 else sides[::-1]
            for pipeline in pipelines:
                for c in contenders:
                    for side in order if rep >= 0 else order[:1]:
                        settle(broker_pid)
                        result = throughput_run(
                            c, bootstrap=kafka.bootstrap, pipeline=pipeline,
                            input_topic=INPUTS[pipeline], partitions=args.partitions,
                            commit_interval=args.commit_interval, rep=rep, workdir=workdir,
                            timeout=120 + args.records / 500, source=side.source,
                        )  # fmt: skip
                        log(f"rep {rep} {pipeline} {c.key} [{side.name}] "
                            f"{result.records_per_s:,.0f} rec/s, "
                            f"{result.cpu_s_per_million:.1f} µs CPU/record")  # fmt: skip
                        if rep >= 0:
                            key = (pipeline, c.key, side.name, rep)
                            rates[key] = result.records_per_s
                            cpus[key] = result.cpu_s_per_million
    finally:
        kafka.stop()
    return rates, cpus


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eos-bench-ab-") as tmp:
        rates, cpus = run(args, Path(tmp))
    columns = [
        f"| pipeline | contender | {args.baseline} | working tree | ratio | per repetition |",
        "|---|---|---:|---:|---:|---|",
    ]
    head = [
        f"# A/B: working tree vs {args.baseline}",
        "",
        f"`python -m bench.ab {shlex.join(sys.argv[1:] if argv is None else argv)}` "
        f"on {time.strftime('%Y-%m-%d %H:%M %Z')}; medians of {args.reps} interleaved "
        "repetitions; ratio = median of per-repetition ratios (new / old).",
        "",
        "Records/s (higher is faster):",
        "",
        *columns,
        *ratio_rows(rates, "working tree", args.baseline),
        "",
        "CPU µs per record, all the process's threads (lower is cheaper; the figure a shared "
        "machine moves least):",
        "",
        *columns,
        *ratio_rows(cpus, "working tree", args.baseline, ".2f"),
    ]
    text = "\n".join(head) + "\n"
    out = args.out / f"ab-{args.baseline.replace('/', '-')}.md"
    out.parent.mkdir(parents=True, exist_ok=True)  # a fresh --out directory
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
