"""Soak: the bridge for hours at a fixed input rate with a stateful pipeline and a nemesis fault
every few minutes, sampling what creeps (memory, file descriptors, threads) into a CSV.

    make soak DURATION=7200 RATE=2000 FAULT_PERIOD=300
    python -m tests.chaos.soak --duration 7200 --rate 2000 --fault-period 300 --out DIR

Two bridge instances run ``tests.chaos.pipelines:soak`` (dedupe by id: keyed state that grows
until its TTL, then stays flat) on the chaos rig (3 brokers behind Toxiproxy). Every
``--sample-every`` seconds (10) a row per live instance goes into ``soak.csv``: RSS, virtual
size, open fds, threads, CPU seconds (psutil, from outside the process), the bridge's own
``eos_bridge_input_records_total``, ``python_gc_*``, the Python heap (allocated blocks), RocksDB's
memory and librdkafka's queue sizes from its ``/metrics`` (app.ops.resources), and the fault in
progress. At the end the cluster is healed and the exactly-once oracle
(:func:`tests.support.chaos.check_exactly_once`) checks everything fed; ``summary.json`` holds
its verdict and ``soak.png`` the plot (when matplotlib is installed; else the CSV only).

The feed also repeats one id in :data:`REPEAT_EVERY`, a few seconds later (well inside the
dedupe's TTL): the pipeline must drop each repeat, so state that a fault or a recovery lost
shows in the oracle as an id emitted twice (unique ids alone would pass whatever the state).
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil

from tests.chaos.faults import FAULTS, bandwidth_held
from tests.chaos.scene import Scene
from tests.support.bridge import http_get, json_records, metric
from tests.support.chaos import Rig

PIPELINE = "tests.chaos.pipelines:soak"
# Faults that need another pipeline (stall-step stalls through tests.chaos.pipelines:stall_once).
SOAK_FAULTS = sorted(k for k in FAULTS if k != "stall-step")
# The soak's bandwidth fault holds the throttle for a fixed span (see bandwidth_held).
SOAK_FAULT_FNS = {**FAULTS, "bandwidth": bandwidth_held}
# As the image sets it (Dockerfile): glibc's malloc arenas capped, so the threads of librdkafka
# and RocksDB do not each grow an arena of their own (fragmentation that reads as RSS growth),
# and a fixed mmap threshold, so multi-MiB fetch buffers never grow a heap (soak attempt 14).
IMAGE_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "1048576"}
# Faults that end a bridge process on purpose: ``--faults brokers`` leaves them out, so each
# process lives the whole soak and its memory curve is one line (a restart hides a leak).
BRIDGE_FAULTS = {"kill-bridge", "rolling-bridge-restart", "zombie-bridge"}
# The watchdog's deadline as with librdkafka's default timeouts (call_timeout 30 s + 15 s), not
# the 12 s the chaos rig's short request and session timeouts derive: a broker paused for 20-30 s
# or restarted in turn ends calls that may well have returned (attempt 11: six exit-3 restarts
# in 2 hours; whether any was a real hang, librdkafka #5456, cannot be told), and each restart
# cuts the memory curves this run is for. `make failover` keeps the short deadline.
STUCK_CALL_TIMEOUT_S = 45.0
WARM_UP_S = 900  # growth is measured after the first 15 minutes of each process
FIELDS = ["t_s", "instance", "pid", "rss_bytes", "vms_bytes", "fds", "threads", "cpu_s",
          "input_records", "gc_collections", "python_blocks", "rocksdb_bytes",
          "consumer_queue", "producer_queue", "fault", "main_heap_bytes", "arena_heap_bytes",
          "consumer_queue_bytes"]  # fmt: skip
# (column, divisor, axis label) of each panel of soak.png
PLOTTED = [("rss_bytes", 2**20, "RSS MiB"), ("python_blocks", 1000, "Python heap, k blocks"),
           ("rocksdb_bytes", 2**20, "RocksDB MiB"), ("consumer_queue", 1, "fetch queue msgs"),
           ("fds", 1, "open fds"), ("threads", 1, "threads")]  # fmt: skip
TICK_S = 0.5
_ARENA_ALIGN = 64 * 2**20  # glibc's HEAP_MAX_SIZE: a thread arena's heaps start at multiples of it


def heap_split(pid: int) -> tuple[int, int]:
    """Resident bytes of glibc's main heap (``[heap]``) and of its thread arenas' heaps
    (anonymous mappings starting at a multiple of 64 MiB), from ``/proc/PID/smaps``: where a
    step in RSS sits (the main thread's allocations, or librdkafka's and RocksDB's threads)."""
    try:
        with open(f"/proc/{pid}/smaps") as smaps:
            return smaps_heaps(smaps)
    except OSError:  # it ended meanwhile
        return 0, 0


def smaps_heaps(lines: Iterable[str]) -> tuple[int, int]:
    """(main heap, thread arenas) resident bytes of smaps ``lines`` (see :func:`heap_split`)."""
    main = arenas = 0
    kind = ""
    for line in lines:
        head = line.split(" ", 1)[0]
        if "-" in head and not head.endswith(":"):  # a mapping's first line
            fields = line.split()
            path = fields[5] if len(fields) > 5 else ""
            start = int(head.split("-")[0], 16)
            kind = "main" if path == "[heap]" else ""
            if not path and start % _ARENA_ALIGN == 0:
                kind = "arena"
        elif kind and line.startswith("Rss:"):
            rss = int(line.split()[1]) * 1024
            main, arenas = (main + rss, arenas) if kind == "main" else (main, arenas + rss)
    return main, arenas


FIRST_ID = 10_000_000  # the rate feed's ids; the faults' own chunks use r0, r1, ...
# One id in REPEAT_EVERY is fed again REPEAT_AFTER_S later (same key, so same partition, and
# same value), unless more than REPEAT_WITHIN_S went by (a fault's pause: the pipeline's
# 120 s TTL, counted in record time, could then have forgotten it).
REPEAT_EVERY, REPEAT_AFTER_S, REPEAT_WITHIN_S = 100, 2.0, 60.0


class RateFeed(threading.Thread):
    """``rate`` records per second (what is behind the clock is caught up each half second,
    so a slow produce does not lower the rate), until stopped; nothing while ``paused`` (a
    fault in progress feeds its own chunk and waits for all of it to be committed, which a
    rate above a throttled link's would never let happen), then on at the rate, no catch-up."""

    def __init__(self, scene: Scene, rate: int) -> None:
        super().__init__(name="soak-feed", daemon=True)
        self.scene, self.rate, self.fed = scene, rate, 0
        self.repeated = 0  # records fed again (not counted in ``fed``, which numbers the ids)
        self.stopped, self.paused = threading.Event(), threading.Event()
        self.errors: list[str] = []  # chunks not confirmed (the feed goes on)
        self._recent: deque[tuple[float, int, int]] = deque()  # (fed at, first id, count)

    def run(self) -> None:
        started = time.monotonic()
        while not self.stopped.wait(TICK_S):
            if self.paused.is_set():
                started = time.monotonic() - self.fed / self.rate  # the pause is not owed
                continue
            due = int(self.rate * (time.monotonic() - started)) - self.fed
            if due > 0:
                first = FIRST_ID + self.fed
                self._send(*json_records(due, start=first), first)
                self._recent.append((time.monotonic(), first, due))
                self.fed += due
            self._repeat()

    def _repeat(self) -> None:
        """Feed again one id in REPEAT_EVERY of the chunks fed REPEAT_AFTER_S ago."""
        now, ids = time.monotonic(), []
        while self._recent and now - self._recent[0][0] >= REPEAT_AFTER_S:
            at, first, count = self._recent.popleft()
            if now - at <= REPEAT_WITHIN_S:
                ids += [i for i in range(first, first + count) if i % REPEAT_EVERY == 0]
        if ids:
            values: list[bytes] = []
            keys: list[bytes] = []
            for i in ids:
                value, key = json_records(1, start=i)
                values += value
                keys += key
            self._send(values, keys, ids[0])
            self.repeated += len(ids)

    def _send(self, values: list[bytes], keys: list[bytes], first: int) -> None:
        try:
            self.scene.kafka.seed(self.scene.src, values, keys)
        except RuntimeError as exc:
            # A rolling broker restart can outlast the flush (attempt 11: this thread died
            # there and the last 34 minutes ran without input). The chunk is not sent again
            # (its ids would repeat): the oracle reads back what landed.
            self.errors.append(f"{time.strftime('%H:%M:%S')} ids from {first}: {exc}")


class Sampler(threading.Thread):
    """A CSV row per live bridge every ``every`` seconds."""

    def __init__(self, scene: Scene, path: Path, every: float) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.scene, self.path, self.every = scene, path, every
        self.fault = ""  # the fault in progress, for the rows
        self.rows = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        with self.path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(FIELDS)
            while not self.stopped.wait(self.every):
                for row in self.sample(time.monotonic() - started):
                    out.writerow(row)
                    self.rows += 1
                f.flush()

    def sample(self, t: float) -> list[list[Any]]:
        rows = []
        for bridge in list(self.scene.bridges):
            if not bridge.running():
                continue
            try:
                proc = psutil.Process(bridge.pid)
                with proc.oneshot():
                    mem, cpu = proc.memory_info(), proc.cpu_times()
                    fds, threads = proc.num_fds(), proc.num_threads()
            except psutil.Error:  # it ended between the check and the look
                continue
            text = http_get(int(bridge.settings["http_port"]), "/metrics")[1]
            rows.append([f"{t:.1f}", bridge.settings["instance_id"], bridge.pid, mem.rss,
                         mem.vms, fds, threads, f"{cpu.user + cpu.system:.2f}",
                         int(metric(text, "eos_bridge_input_records_total")),
                         int(metric(text, "python_gc_collections_total")),
                         int(metric(text, "eos_bridge_python_allocated_blocks")),
                         int(metric(text, "eos_bridge_state_memory_bytes")),
                         int(metric(text, "eos_bridge_client_queue_messages", client="consumer")),
                         int(metric(text, "eos_bridge_client_queue_messages", client="producer")),
                         self.fault, *heap_split(bridge.pid),
                         int(metric(text, "eos_bridge_client_queue_bytes", client="consumer")),
                         ])  # fmt: skip
        return rows


@dataclass
class SoakResult:
    seconds: float
    samples: int
    fed: int  # offered; a chunk in feed_errors may be missing in part (the oracle reads back)
    faults: list[str]
    records: int = 0
    aborted_seen_uncommitted: int = 0
    repeats: int = 0  # inputs whose id came earlier, dropped by the dedupe as they must be
    restarts: int = 0  # exits 3 or 5 restarted by the supervisor (as Kubernetes would)
    liveness_kills: int = 0  # /livez failed 3 times in a row: SIGKILL and restart
    feed_errors: list[str] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    plot: str | None = None
    # glibc's malloc settings the bridges ran with (the image's and any --env)
    environment: dict[str, str] = field(default_factory=dict)


def run(rig: Rig, out: Path, duration: float, rate: int, fault_period: float,
        every: float = 10.0, seed: int = 1, faults: list[str] | None = None,
        min_faults: int = 0) -> SoakResult:  # fmt: skip
    """One soak on ``rig``; writes soak.csv, summary.json (and soak.png) under ``out``.

    It runs ``duration`` seconds and then on until ``min_faults`` faults have run (a condition,
    so a short run on a slow machine still has its fault)."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    rng, started = random.Random(seed), time.monotonic()
    scene = Scene(rig, out / "logs", records=200_000, proxied=True, pipeline=PIPELINE,
                  stuck_call_timeout=STUCK_CALL_TIMEOUT_S)  # fmt: skip
    feed, sampler = RateFeed(scene, rate), Sampler(scene, out / "soak.csv", every)
    result = SoakResult(0, 0, 0, [])
    result.environment = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    try:
        scene.start(2)
        scene.feed_and_commit(2000)
        feed.start()
        sampler.start()
        next_fault, end = time.monotonic() + fault_period, started + duration
        while time.monotonic() < end or len(result.faults) < min_faults:
            scene.sup.hold(min(1.0, max(0.0, min(end, next_fault) - time.monotonic())))
            if not feed.is_alive():
                raise RuntimeError("the rate feed stopped (see its traceback above)")
            if time.monotonic() >= next_fault:
                sampler.fault = rng.choice(faults or SOAK_FAULTS)
                result.faults.append(sampler.fault)
                feed.paused.set()
                SOAK_FAULT_FNS[sampler.fault](scene, rng)
                rig.heal()
                feed.paused.clear()
                sampler.fault, next_fault = "", time.monotonic() + fault_period
        feed.stopped.set()
        feed.join()
        verdict = scene.finish(repeats=True)  # heals, feeds, stops the bridges, the oracle
        result.records, result.aborted_seen_uncommitted = (
            verdict.records,
            verdict.aborted_uncommitted,
        )
        result.repeats = verdict.repeats
    except Exception as exc:  # a violation or a stuck fault: reported, logs kept
        result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    finally:
        feed.stopped.set()
        sampler.stopped.set()
        if sampler.is_alive():
            sampler.join()
        scene.close()
        result.restarts, result.samples = scene.sup.restarts, sampler.rows
        result.liveness_kills = scene.sup.liveness_kills
        result.fed = feed.fed + feed.repeated + scene.feeder.fed
        result.seconds = time.monotonic() - started
        result.feed_errors = feed.errors
        result.plot = plot(out / "soak.csv", out / "soak.png")
        result.processes = growth(out / "soak.csv")
        (out / "summary.json").write_bytes(orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2))
    return result


def growth(csv_path: Path, warm_up: float = WARM_UP_S) -> list[dict[str, Any]]:
    """Per bridge process (instance, pid): how long it was sampled and, when it lived past
    ``warm_up`` by at least as long again, RSS growth per hour from the warm-up's end to its
    last sample (medians of the first and last 5 % of those samples) and fds/threads there;
    also the same over the second half of those samples (after RocksDB's bounded caches have
    had longer to fill) and for RSS less RocksDB's own memory (what a leak would be). The
    ``*_trend_*`` figures are least-squares slopes over every sample of the span, in % per
    hour of the fitted start: two 5 % windows of a short span can land on a high and a low of
    RSS's ±20 MiB swings (a batch, a collection), a fit over all samples does not."""
    if not csv_path.exists():
        return []
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    out = []
    for key in sorted({(r["instance"], r["pid"]) for r in rows}):
        mine = [r for r in rows if (r["instance"], r["pid"]) == key]
        t0 = float(mine[0]["t_s"])
        seen = {"instance": key[0], "pid": int(key[1]), "seconds": float(mine[-1]["t_s"]) - t0}
        late = [r for r in mine if float(r["t_s"]) - t0 >= warm_up]
        if late and float(late[-1]["t_s"]) - float(late[0]["t_s"]) >= warm_up:
            n = max(1, len(late) // 20)
            head, tail = late[:n], late[-n:]
            seen |= {
                "rss_mib": [_median_mib(x, "rss_bytes") for x in (head, tail)],
                "rss_growth_pct_per_hour": _pct_per_hour(late, _rss),
                "rss_growth_pct_per_hour_second_half": _pct_per_hour(late[len(late) // 2 :], _rss),
                "rss_trend_pct_per_hour": _trend_pct_per_hour(late, _rss),
                "rss_less_rocksdb_trend_pct_per_hour": _trend_pct_per_hour(late, _rss_less_rocksdb),
                "rss_less_rocksdb_growth_pct_per_hour": _pct_per_hour(late, _rss_less_rocksdb),
                **_after_cache_full(late, warm_up, t0),
                "rocksdb_mib": [_median_mib(x, "rocksdb_bytes") for x in (head, tail)],
                "fds": [int(head[0]["fds"]), int(tail[-1]["fds"])],
                "threads": [int(head[0]["threads"]), int(tail[-1]["threads"])],
            }
        out.append(seen)
    return out


def _after_cache_full(rows: list[dict[str, str]], span: float, t0: float) -> dict[str, Any]:
    """RSS growth from the first sample whose RocksDB memory (5-minute median, as memtables
    come and go) reached 95 % of its highest such median: the block cache is bounded, so
    growth while it fills is not a leak. Reported when at least ``span`` seconds follow;
    ``cache_full_at_s`` counts from the process's first sample (``t0``)."""
    window = 30  # samples: 5 minutes at one per 10 s
    if len(rows) < window:
        return {}
    smooth = [
        statistics.median(float(r["rocksdb_bytes"]) for r in rows[i : i + window])
        for i in range(len(rows) - window + 1)
    ]
    top = max(smooth)
    first = next(i for i, v in enumerate(smooth) if v >= 0.95 * top) + window - 1
    after = rows[first:]
    if float(after[-1]["t_s"]) - float(after[0]["t_s"]) < span:
        return {}
    return {
        "cache_full_at_s": round(float(after[0]["t_s"]) - t0),
        "rss_growth_pct_per_hour_after_cache_full": _pct_per_hour(after, _rss),
        "rss_trend_pct_per_hour_after_cache_full": _trend_pct_per_hour(after, _rss),
    }


def _rss(row: dict[str, str]) -> float:
    return float(row["rss_bytes"])


def _rss_less_rocksdb(row: dict[str, str]) -> float:
    return float(row["rss_bytes"]) - float(row["rocksdb_bytes"])


def _pct_per_hour(rows: list[dict[str, str]], value: Callable[[dict[str, str]], float]) -> float:
    """Growth per hour, in % of the start, between the medians of the first and last 5 %."""
    n = max(1, len(rows) // 20)
    head, tail = rows[:n], rows[-n:]
    hours = (float(tail[-1]["t_s"]) - float(head[0]["t_s"])) / 3600
    v0, v1 = (statistics.median(value(r) for r in x) for x in (head, tail))
    return round((v1 - v0) / v0 * 100 / hours, 2)


def _trend_pct_per_hour(
    rows: list[dict[str, str]], value: Callable[[dict[str, str]], float]
) -> float:
    """Least-squares slope per hour, in % of the fitted value at the first sample."""
    hours = [float(r["t_s"]) / 3600 for r in rows]
    values = [value(r) for r in rows]
    slope, intercept = statistics.linear_regression(hours, values)
    return round(slope / (intercept + slope * hours[0]) * 100, 2)


def _median_mib(rows: list[dict[str, str]], column: str) -> float:
    return round(statistics.median(float(r[column]) for r in rows) / 2**20, 1)


def plot(csv_path: Path, png: Path) -> str | None:
    """RSS, fds and threads per instance over time; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if not csv_path.exists():  # the soak ended before its first sample
        return None
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    fig, axes = plt.subplots(len(PLOTTED), 1, sharex=True, figsize=(10, 2.4 * len(PLOTTED)))
    for instance in sorted({r["instance"] for r in rows}):
        mine = [r for r in rows if r["instance"] == instance]
        t = [float(r["t_s"]) / 60 for r in mine]
        for ax, (col, scale, _) in zip(axes, PLOTTED, strict=True):
            ax.plot(t, [float(r[col]) / scale for r in mine], ".", markersize=2, label=instance)
    for ax, (_, _, label) in zip(axes, PLOTTED, strict=True):
        ax.set_ylabel(label)
        ax.legend(loc="upper left")
    axes[-1].set_xlabel("minutes")
    fig.savefig(png, dpi=80)
    plt.close(fig)
    return str(png)


def fault_names(choice: str) -> list[str]:
    if choice == "all":
        return SOAK_FAULTS
    if choice == "brokers":
        return [f for f in SOAK_FAULTS if f not in BRIDGE_FAULTS]
    names = [f.strip() for f in choice.split(",") if f.strip()]
    unknown = sorted(set(names) - set(SOAK_FAULTS))
    if unknown or not names:
        raise SystemExit(f"--faults: unknown {unknown or 'empty list'}; known: {SOAK_FAULTS}")
    return names


# Disk the three brokers' logs take per input record (input, output, changelog and DLQ topics,
# three replicas each, nothing deleted within a soak): 24 GB after 2 h at 2000 records/s.
DISK_BYTES_PER_RECORD = 1700


def disk_needed(rate: int, duration: float) -> int:
    """Bytes of broker logs a soak writes (with a quarter to spare)."""
    return int(rate * duration * DISK_BYTES_PER_RECORD * 1.25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=7200, help="seconds (default 2 h)")
    parser.add_argument("--rate", type=int, default=2000, help="input records per second")
    parser.add_argument("--fault-period", type=float, default=300, help="seconds between faults")
    parser.add_argument("--sample-every", type=float, default=10.0, help="seconds between rows")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--faults", default="all",
        help="all, brokers (no fault that ends a bridge process) or a comma list of names",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench/results/soak"))
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable for the bridges on top of the image's (repeatable), "
        "e.g. MALLOC_MMAP_THRESHOLD_=1048576 to try an allocator setting",
    )  # fmt: skip
    args = parser.parse_args(argv)
    env = dict(IMAGE_ENV)
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    faults = fault_names(args.faults)
    need, free = (
        disk_needed(args.rate, args.duration),
        shutil.disk_usage(tempfile.gettempdir()).free,
    )
    if free < need:
        raise SystemExit(
            f"the soak needs about {need / 1e9:.0f} GB free in {tempfile.gettempdir()} for its "
            f"brokers' logs (--rate {args.rate} for {args.duration:.0f} s), has {free / 1e9:.0f} GB"
        )
    workdir = Path(tempfile.mkdtemp(prefix="eos-soak-"))
    rig = Rig(workdir).start()
    os.environ.update(env)  # the bridges (subprocesses) run with the image's environment
    print(f"bridge environment: {env}", flush=True)
    try:
        result = run(rig, args.out, args.duration, args.rate, args.fault_period,
                     args.sample_every, args.seed, faults)  # fmt: skip
    finally:
        rig.stop()
        # Tens of GB of broker logs; the results are in --out.
        shutil.rmtree(workdir, ignore_errors=True)
    print(orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2).decode())
    print(f"command: {' '.join(sys.argv)}")
    return 0 if result.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
