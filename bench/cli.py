"""``python -m bench``: start a local broker, seed the inputs, run every contender on every
pipeline in interleaved repetitions, write ``bench/results/latest.{json,md,png}``.

Each contender is its own process (its own CPU seconds and peak RSS); each repetition runs the
contenders in a rotated order, so slow phases of a shared machine hit all of them alike, and a
contender's commit intervals back to back (:func:`schedule`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import confluent_kafka

from bench import report
from bench.contenders import BY_KEY, CONTENDERS, REGISTRY_URL_ENV, REPO, Contender, quix_python
from bench.data import avro_encoder, seed_topic
from bench.kafka import create_topics
from bench.latency import latency_run
from bench.latency_stats import common_rate, offered_rates
from bench.process import settle
from bench.throughput import throughput_run
from devkit.kafka import LocalKafka
from devkit.registry import LocalRegistry

INPUTS = {
    "p1": "bench-in-kv",
    "p2": "bench-in-kv",
    "p2r": "bench-in-kv",
    "p3": "bench-in-win",
    "copy": "bench-in-kv",
}
INPUT_KEYS = {"bench-in-kv": 100_000, "bench-in-win": 1000}
AVRO_PIPELINES = ("p1", "p2")  # P3's windows read the record timestamp: JSON only
# The exactly-once contenders the latency runs compare (issue 34).
LATENCY_CONTENDERS = ("bridge-eos", "bridge-eos-spec", "kstreams-eos", "quix-eos")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--records", type=int, default=1_000_000, help="input records per pipeline")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--reps", type=int, default=3, help="repetitions (medians are reported)")
    p.add_argument(
        "--commit-intervals", default="0.1,1", help="seconds, comma-separated (e.g. 0.1,1): every "
        "throughput and latency measurement runs at each, for every contender",
    )  # fmt: skip
    p.add_argument("--commit-interval", type=float, help="one interval (= --commit-intervals X)")
    p.add_argument(
        "--pipelines", default="p1,p2,p3,copy", help="of p1,p2,p3,copy (bytes passthrough)"
    )
    p.add_argument("--contenders", default=",".join(c.key for c in CONTENDERS))
    p.add_argument(
        "--latency-rate", default="auto", help="the common offered load of the latency runs, "
        "records/s; auto = half of Kafka Streams EOS's max throughput (of the slowest "
        "contender's without Kafka Streams) in the same repetition; 0 = no latency runs",
    )  # fmt: skip
    p.add_argument(
        "--latency-fractions", default="0.25,0.5,0.75",
        help="offered loads as fractions of each contender's own max throughput ('' = none)",
    )  # fmt: skip
    p.add_argument("--latency-pipelines", default="p1,p2", help="of p1,p2")
    p.add_argument(
        "--latency-contenders", default=",".join(LATENCY_CONTENDERS),
        help="the contenders of the latency runs (those also in --contenders)",
    )  # fmt: skip
    p.add_argument("--latency-seconds", type=float, default=10.0, help="measured window")
    p.add_argument("--no-recovery", action="store_true", help="skip bench.bench_recovery")
    p.add_argument("--no-spark", action="store_true", help="skip bench.spark_spec")
    p.add_argument("--spark-records", type=int, default=100_000, help="records of bench.spark_spec")
    p.add_argument("--no-warmup", action="store_true", help="skip the uncounted run after seeding")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs, broker data)")
    args = p.parse_args(argv)
    if args.commit_interval is not None:
        args.commit_intervals = str(args.commit_interval)
    try:
        args.intervals = _floats(args.commit_intervals)
        args.fractions = _floats(args.latency_fractions)
        if args.latency_rate != "auto":
            args.latency_rate = int(args.latency_rate)
    except ValueError as exc:
        p.error(f"{exc} (--commit-intervals, --latency-fractions: numbers, comma-separated; "
                "--latency-rate: auto or records/s)")  # fmt: skip
    if not args.intervals or min(args.intervals) <= 0:
        p.error("--commit-intervals: at least one interval, every one > 0 s")
    return args


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def versions(bootstrap_jars: str) -> dict[str, str]:
    def dist(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    def git(*argv: str) -> str:
        out = subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git(
        "status", "--porcelain", "--untracked-files=no", "--", "app", "changelog", "bench"
    )
    if changed:
        sha += f" + uncommitted changes in {len(changed.splitlines())} file(s)"
    return {
        "eos-bridge": f"{dist('eos-bridge')} (git {sha})",
        "quixstreams": quix_version(),
        "confluent-kafka": f"{dist('confluent-kafka')} (librdkafka "
        f"{confluent_kafka.libversion()[0]})",
        "orjson": dist("orjson"),
        "rocksdict": dist("rocksdict"),
        "python": platform.python_version(),
        "kafka broker": bootstrap_jars,
    }


def quix_version() -> str:
    """Quix Streams' version and the librdkafka it runs on, asked of its own virtualenv."""
    try:
        python = quix_python()
    except FileNotFoundError:
        return "not installed"
    code = (
        "import confluent_kafka as ck, importlib.metadata as m; "
        "print(m.version('quixstreams'), m.version('confluent-kafka'), ck.libversion()[0])"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    quix, client, lib = out.stdout.split()
    return f"{quix} (own venv: confluent-kafka {client}, librdkafka {lib})"


def _broker_version() -> str:
    pom = (REPO / "devkit" / "kafka" / "pom.xml").read_text()
    start = pom.find("<kafka.version>") + len("<kafka.version>")
    return f"Apache Kafka {pom[start : pom.find('</kafka.version>')]} (KRaft, 1 broker)"


def snapshot(target: Path) -> Path:
    """Copy the code under test (working tree) aside: every contender of the run executes the
    same code even while the working tree changes."""
    ignore = shutil.ignore_patterns("__pycache__", "results", "*.pyc")
    # devkit and spark_jobs: the bench's own imports (launcher, Maven fetcher) in the snapshot.
    for package in ("app", "changelog", "spark_jobs", "devkit", "bench"):
        shutil.copytree(REPO / package, target / package, ignore=ignore)
    return target


def rotated(contenders: list[Contender], rep: int) -> list[Contender]:
    k = rep % len(contenders)
    return contenders[k:] + contenders[:k]


def schedule(
    pipelines: list[str], contenders: list[Contender], intervals: list[float], rep: int
) -> list[tuple[str, Contender, float]]:
    """One repetition's throughput runs, in order: per pipeline, the contenders rotated; each
    contender's commit intervals back to back, shortest first in even repetitions and longest
    first in odd ones. A contender's interval ratio (issue 34: 0.1 s against 1 s) then
    compares two adjacent runs, not two halves of the repetition minutes apart, and neither
    interval always runs first after another contender."""
    ordered = sorted(intervals) if rep % 2 == 0 else sorted(intervals, reverse=True)
    return [(p, c, i) for p in pipelines for c in rotated(contenders, rep) for i in ordered]


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    contenders = [BY_KEY[k.strip()] for k in args.contenders.split(",") if k.strip()]
    source = snapshot(workdir / "src")
    code_versions = versions(_broker_version())  # of the snapshot, taken now
    kafka = LocalKafka(workdir / "kafka", brokers=1)
    # Cross-cluster contenders write to a second broker (bench.xcluster).
    target = LocalKafka(workdir / "kafka-target", brokers=1) if any(
        c.xcluster for c in contenders
    ) else None  # fmt: skip
    runs: list[dict[str, Any]] = []
    latency: list[dict[str, Any]] = []
    recovery: dict[str, Any] | None = None
    spark: dict[str, Any] | None = None
    kafka.start()
    if target is not None:
        target.start()
    try:
        bootstrap = kafka.bootstrap
        registry = _start_registry(contenders, workdir)
        args.target = target.bootstrap if target is not None else None
        for topic, plain in input_topics(pipelines, contenders):
            started = time.monotonic()
            create_topics(bootstrap, [topic], args.partitions)
            encode = None if topic == plain else avro_encoder(_registry_url(), topic)
            seed_topic(bootstrap, topic, args.records, INPUT_KEYS[plain], encode=encode)
            log(f"seeded {topic}: {args.records:,} records in {time.monotonic() - started:.0f}s")
        timeout = 120 + args.records / 500
        broker_pid = kafka.brokers[0].pid
        assert broker_pid is not None  # started above
        if not args.no_warmup and contenders and pipelines:
            # The first run after seeding is often tens of percent slow (the broker's read and
            # transaction paths are cold): one uncounted run takes that hit for everyone.
            settle(broker_pid)
            log("warm-up run (not counted):")
            _throughput(
                contenders[0],
                args,
                bootstrap,
                pipelines[0],
                -1,
                workdir,
                timeout,
                source,
                _primary(args.intervals),
            )
        for rep in range(args.reps):
            maxima: dict[tuple[str, float], dict[str, float]] = {}
            for pipeline, c, interval in schedule(pipelines, contenders, args.intervals, rep):
                if not runs_on(c, pipeline):
                    continue
                settle(broker_pid)
                entry = _throughput(
                    c, args, bootstrap, pipeline, rep, workdir, timeout, source, interval
                )
                runs.append(entry)
                if "error" not in entry:
                    maxima.setdefault((pipeline, interval), {})[c.key] = entry["records_per_s"]
            if args.latency_rate != 0:
                latency += _latency_rep(args, contenders, maxima, rep, broker_pid, bootstrap,
                                        workdir, source)  # fmt: skip
        if not args.no_recovery:
            recovery = _recovery(bootstrap, args, source)
        if not args.no_spark:
            spark = _spark(bootstrap, args, source, workdir)
    finally:
        if registry is not None:
            registry.stop()
        kafka.stop()
        if target is not None:
            target.stop()
    meta = {
        "command": ("python -m bench " + shlex.join(sys.argv[1:])).rstrip(),
        "records": args.records,
        "partitions": args.partitions,
        "reps": args.reps,
        "commit_interval": _primary(args.intervals),
        "commit_intervals": args.intervals,
        "latency_rate": args.latency_rate,
        "latency_fractions": args.fractions,
        "latency_seconds": args.latency_seconds,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{platform.machine()}, {_cpus()} CPUs (shared), Linux {platform.release()}",
        "versions": code_versions,
    }
    result = {"meta": meta, "runs": runs, "latency": latency, "recovery": recovery}
    result["spark"] = spark
    report.add_summaries(result)
    return result


def runs_on(contender: Contender, pipeline: str) -> bool:
    """Whether ``contender`` runs ``pipeline`` (:meth:`Contender.runs`; the Avro contenders:
    P1 and P2 only)."""
    return contender.runs(pipeline) and (contender.fmt == "json" or pipeline in AVRO_PIPELINES)


def input_topics(pipelines: list[str], contenders: list[Contender]) -> list[tuple[str, str]]:
    """The inputs to seed, as (topic, the JSON topic it is a twin of), sorted."""
    wanted = {
        (c.input_topic(INPUTS[p]), INPUTS[p])
        for p in pipelines
        for c in contenders
        if runs_on(c, p)
    }
    return sorted(wanted)


def _start_registry(contenders: list[Contender], workdir: Path) -> LocalRegistry | None:
    """The dev Schema Registry (devkit.registry) when an Avro contender runs; its URL goes to
    the contenders through ``REGISTRY_URL_ENV``."""
    if not any(c.fmt == "avro" for c in contenders):
        return None
    registry = LocalRegistry(workdir / "registry")
    registry.start()
    os.environ[REGISTRY_URL_ENV] = registry.url
    log(f"schema registry: {registry.url}")
    return registry


def _registry_url() -> str:
    return os.environ[REGISTRY_URL_ENV]


def _primary(intervals: list[float]) -> float:
    """The interval of the headline tables: 1 s when measured, else the longest."""
    return 1.0 if 1.0 in intervals else max(intervals)


KSTREAMS_EOS = ("kstreams-eos", "kstreams-eos-c0", "kstreams-eos-warm", "kstreams-eos-c0-warm")


def _latency_rep(
    args: argparse.Namespace, contenders: list[Contender],
    maxima: dict[tuple[str, float], dict[str, float]], rep: int, broker_pid: int,
    bootstrap: str, workdir: Path, source: Path,
) -> list[dict[str, Any]]:  # fmt: skip
    """One repetition of the latency runs: per interval, pipeline and contender, the offered
    loads at ``--latency-fractions`` of the contender's max throughput measured in this
    repetition at that interval, and the common rate (the CDF is kept for that one)."""
    out: list[dict[str, Any]] = []
    wanted = [p.strip() for p in args.latency_pipelines.split(",") if p.strip()]
    chosen = {k.strip() for k in args.latency_contenders.split(",")}
    contenders = [c for c in contenders if c.key in chosen]
    for interval in args.intervals:
        for pipeline in [p for p in wanted if p in ("p1", "p2")]:
            mx = maxima.get((pipeline, interval), {})
            common = (
                common_rate(mx, KSTREAMS_EOS) if args.latency_rate == "auto" else args.latency_rate
            )
            for c in rotated(contenders, rep):
                loads = [(f"{f:.0%}", r) for f, r in zip(args.fractions,
                         offered_rates(mx.get(c.key, 0), args.fractions), strict=True)
                         if c.key in mx]  # fmt: skip
                if common is not None:
                    loads.append(("common", common))
                for load, rate in loads:
                    settle(broker_pid)
                    out += _latency(c, args, bootstrap, pipeline, interval, load, rate, rep,
                                    workdir, source)  # fmt: skip
    return out


def _throughput(
    c: Contender, args: argparse.Namespace, bootstrap: str, pipeline: str, rep: int,
    workdir: Path, timeout: float, source: Path, interval: float,
) -> dict[str, Any]:  # fmt: skip
    try:
        result = throughput_run(
            c, bootstrap=bootstrap, pipeline=pipeline, input_topic=c.input_topic(INPUTS[pipeline]),
            partitions=args.partitions, commit_interval=interval, rep=rep,
            workdir=workdir, timeout=timeout, source=source,
            target=getattr(args, "target", None) if c.xcluster else None,
        ).as_dict()  # fmt: skip
        result["commit_interval"] = interval
        log(
            f"rep {rep} {pipeline} @{interval:g}s {c.key:<10} "
            f"{result['records_per_s']:>9,.0f} rec/s  "
            f"cpu {result['cpu_s_per_million']:5.1f} s/M  rss {result['peak_rss_mb']:4.0f} MB  "
            f"out {result['outputs']:,}"
        )
        return result
    except Exception as exc:
        log(f"rep {rep} {pipeline} @{interval:g}s {c.key}: FAILED {exc}")
        return {
            "pipeline": pipeline, "contender": c.key, "rep": rep, "commit_interval": interval,
            "error": str(exc),
        }  # fmt: skip


def _latency(
    c: Contender, args: argparse.Namespace, bootstrap: str, pipeline: str, interval: float,
    load: str, rate: int, rep: int, workdir: Path, source: Path,
) -> list[dict[str, Any]]:  # fmt: skip
    try:
        result = latency_run(
            c, bootstrap=bootstrap, pipeline=pipeline, partitions=args.partitions,
            commit_interval=interval, rep=rep, workdir=workdir, rate=rate,
            duration=args.latency_seconds, source=source, curve=load == "common",
        )  # fmt: skip
        result["load"] = load
        log(
            f"rep {rep} latency {pipeline} @{interval:g}s {c.key:<10} {load:>6} {rate:>7,}/s "
            f"(achieved {result['achieved_rate']:,.0f}/s): p50 {result['p50_ms']:.0f} "
            f"p99 {result['p99_ms']:.0f} p99.9 {result['p99_9_ms']:.0f} "
            f"max {result['max_ms']:.0f} ms, {result['samples']:,} samples, "
            f"{result['unseen']} unseen"
        )
        return [result]
    except Exception as exc:
        log(f"rep {rep} latency {pipeline} @{interval:g}s {c.key} {load}: FAILED {exc}")
        return []


def _recovery(bootstrap: str, args: argparse.Namespace, source: Path) -> dict[str, Any] | None:
    """State recovery records/s: runs the state benchmark (``bench.bench_recovery``, its own
    processes) against this broker and keeps what it reports."""
    if not (source / "bench" / "bench_recovery.py").exists():
        log("bench.bench_recovery not found: no recovery figure")
        return None
    argv = [sys.executable, "-m", "bench.bench_recovery", "--records", str(args.records)]
    argv += ["--cache-mb", "64"]
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "PYTHONPATH": str(source)}
    log("state recovery: " + shlex.join(argv[1:]))
    try:
        proc = subprocess.run(
            argv, env=env, cwd=source, capture_output=True, text=True, timeout=1800, check=False
        )
    except subprocess.TimeoutExpired:
        log("state recovery benchmark timed out")
        return None
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    for line in lines:
        log(f"  {line}")
    if proc.returncode != 0:
        log(f"state recovery benchmark failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rates = {
        m.group(1): float(m.group(2).replace(",", ""))
        for m in (_RESTORE.search(line) for line in lines)
        if m is not None
    }
    return {
        "command": "python -m bench.bench_recovery " + shlex.join(argv[3:]),
        "exit_code": proc.returncode,
        "restore_records_per_s": rates,
        "output": lines,
    }


def _spark(
    bootstrap: str, args: argparse.Namespace, source: Path, workdir: Path
) -> dict[str, Any] | None:
    """Records/s of the Spark streaming job for spec (a) and of the same work hand-written in
    PySpark, both pairs, in one run (``bench.spark_spec``, its own process and Spark session)."""
    if not (source / "bench" / "spark_spec.py").exists():
        log("bench.spark_spec not found: no Spark figure")
        return None
    out = workdir / "spark-spec.json"
    argv = [sys.executable, "-m", "bench.spark_spec", "--records", str(args.spark_records)]
    argv += ["--reps", "2", "--out", str(out)]
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "PYTHONPATH": str(source)}
    log("spark spec overhead: " + shlex.join(argv[1:]))
    try:
        proc = subprocess.run(
            argv, env=env, cwd=source, capture_output=True, text=True, timeout=5400, check=False
        )
    except subprocess.TimeoutExpired:
        log("spark benchmark timed out")
        return None
    if proc.returncode != 0 or not out.exists():
        log(f"spark benchmark failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return None
    result: dict[str, Any] = json.loads(out.read_text())
    log(f"  spark: {result['medians_records_per_s']}, overhead {result['overhead']:.1%}")
    if "query_overhead" in result:
        query = result["medians_query_records_per_s"]
        log(f"  spark, query alone: {query}, overhead {result['query_overhead']:.1%}")
    for pair, figures in result.get("pairs", {}).items():
        log(f"  spark {pair}: overhead {figures['overhead']:.1%} end to end")
    return result


_RESTORE = re.compile(r"restore \((.+?)\):.*? = ([\d,]+) records/s")  # the wall-clock rate


def _cpus() -> int:
    return os.cpu_count() or 0


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: the running contender and the broker are stopped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    workdir = Path(tempfile.mkdtemp(prefix="eos-bench-"))
    try:
        result = run(args, workdir)
    finally:
        if args.keep:
            log(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report.write(result, args.out)
    log(f"wrote {args.out / 'latest.md'}")
    print((args.out / "latest.md").read_text())
    return 0 if all("error" not in r for r in result["runs"]) else 1
