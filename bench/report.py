"""Turn the raw runs into medians and ratios; write latest.json, latest.md and latest.png."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.contenders import BY_KEY, CONTENDERS
from bench.report_latency import (
    interval_goals,
    intervals_md,
    latency_charts,
    latency_md,
    summarise_latency,
)

PIPELINE_TITLES = {
    "p1": "P1 filter + map (~200-byte JSON)",
    "p2": "P2 count by key (100k keys)",
    "p2r": "P2r count by a value field (key_by user: repartitioned; Kafka Streams groupBy)",
    "p3": "P3 tumbling window sum (10 s, 1000 keys)",
    "copy": "bytes passthrough (no parsing)",
}
# (contender, peer, ratio, pipelines): the contender's throughput ≥ ratio x the peer's
_ALL, _KS = ("p1", "p2", "p3"), ("p1", "p2")
GOALS = (
    ("bridge-eos", "quix-eos", 3.0, _ALL),
    ("bridge-eos", "hand-alo", 0.9, _ALL),
    ("bridge-eos", "kstreams-eos", 2.0, _KS),
    ("bridge-eos", "kstreams-eos-c0", 2.0, _KS),
    ("bridge-eos-spec", "kstreams-eos", 2.0, _KS),
    ("bridge-eos-spec", "kstreams-eos-c0", 2.0, _KS),
    ("bridge-eos-spec", "bridge-eos", 0.9, _ALL),
    # issue 29: Avro in and out through the registry, against the same form on JSON
    ("bridge-eos-avro", "bridge-eos", 0.8, ("p1",)),
    ("bridge-eos-spec-avro", "bridge-eos-spec", 0.8, ("p1",)),
    # no goal (None): the same ratio for the peers, and the bridge against the Avro hand loop
    ("hand-eos-avro", "hand-eos", None, _KS),
    ("quix-eos-avro", "quix-eos", None, _KS),
    ("bridge-eos-avro", "hand-eos-avro", None, _KS),
    ("bridge-eos", "hand-eos", None, _KS),
)


NOTES = [
    "## Notes",
    "",
    "- Every contender is its own process started from a snapshot of the code taken when the run "
    "began; all read the same seeded input from the earliest offset under a fresh group, commit "
    "every commit interval, and are stopped with SIGTERM once caught up.",
    "- eos-bridge runs with its defaults (batch 2000, app/kafka/defaults.py); Quix Streams as "
    "shipped (`Application(processing_guarantee=..., commit_interval=..., "
    'auto_offset_reset="earliest")`, State API for P2, `tumbling_window().agg(Sum).final()` '
    "for P3).",
    "- Quix Streams runs from its own virtualenv (`.venv-quix`, `make quix-venv`) on the "
    "confluent-kafka it pins (<2.13); eos-bridge and the hand loops on the project's newer one "
    "(both librdkafka versions are listed below).",
    "- The hand-written loop and the raw copy use `consume(num_messages=2000)`, orjson, one "
    "produce per record, flush + synchronous commit every interval, librdkafka defaults plus "
    "eos-bridge's consumer fetch settings. Their P2/P3 state is a plain dict: nothing durable "
    "(no changelog, no RocksDB), so against P2/P3 they are an upper bound no durable engine "
    "reaches; the like-for-like comparison with the hand loop is P1.",
    "- The hand loop's exactly-once form (`hand-eos`) commits one transaction per interval "
    "with the input offsets in it; its Avro form (`hand-eos-avro`) reads the 5-byte Confluent "
    "header, fetches each writer schema once by ID and calls fastavro's `schemaless_reader`/"
    "`schemaless_writer` once per record (bench/contenders/hand_avro.py). Quix's Avro form "
    "uses `quixstreams.models.serializers.avro` against the same registry.",
    "- Quix's P3 emits slightly fewer windows than eos-bridge and the hand loop: it closes a "
    "window on its own watermark rules; all three process every input record.",
    "- After seeding, one uncounted warm-up run (the first contender on the first pipeline): "
    "the first run on a fresh broker is often tens of percent slower, whoever runs it.",
    "- Before each run the bench writes dirty pages back (`sync`) and waits, at most 30 s, until "
    "the broker is idle (deleted topics, compaction), so the previous run's leftovers do not "
    "land on the next contender.",
    "- The machine is shared with other engineers' test runs: single figures move by tens of "
    "percent between repetitions; read the per-repetition ratios.",
    "",
]


def _goal(v: dict[str, Any]) -> str:
    """``goal ≥ 0.8: met`` / ``NOT met``, or ``no goal`` for a comparison without one."""
    if v["goal"] is None:
        return "no goal"
    return f"goal ≥ {v['goal']}: {'met' if v['ratio'] >= v['goal'] else 'NOT met'}"


def _median(rows: list[dict[str, Any]], field: str) -> float:
    return float(statistics.median(r[field] for r in rows))


def summarise(runs: list[dict[str, Any]], latency: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per (pipeline, contender); ratios are medians of per-repetition ratios."""
    summary: dict[str, Any] = {}
    for pipeline in sorted({r["pipeline"] for r in runs}):
        ok = [r for r in runs if r["pipeline"] == pipeline and "error" not in r]
        rows: dict[str, Any] = {}
        for c in CONTENDERS:
            mine = [r for r in ok if r["contender"] == c.key]
            if not mine:
                continue
            rows[c.key] = {
                "runs": len(mine),
                "records_per_s": _median(mine, "records_per_s"),
                "records_per_s_min": min(r["records_per_s"] for r in mine),
                "records_per_s_max": max(r["records_per_s"] for r in mine),
                # runs of older reports have no such field
                "committed_records_per_s": _median(mine, "committed_records_per_s")
                if all("committed_records_per_s" in r for r in mine)
                else None,
                "cpu_s_per_million": _median(mine, "cpu_s_per_million"),
                "peak_rss_mb": _median(mine, "peak_rss_mb"),
                "startup_s": _median(mine, "startup_s"),
                "outputs": int(_median(mine, "outputs")),
                "vs_bridge_eos": _ratio(ok, c.key, "bridge-eos"),
            }
        goals = {
            f"{mine}/{peer}": {
                "goal": goal,
                "ratio": _ratio(ok, mine, peer),
                "per_rep": _ratios(ok, mine, peer),
                # CPU efficiency: peer CPU per record / contender CPU per record (>1 = cheaper)
                "cpu_ratio": _ratio(ok, peer, mine, "cpu_s_per_million"),
            }
            for mine, peer, goal, pipelines in GOALS
            if pipeline in pipelines
        }
        summary[pipeline] = {"contenders": rows, "goals": goals}
    for c in CONTENDERS:
        # latency entries of reports before the offered-load mode (P1, one rate, no pipeline)
        mine = [x for x in latency if x["contender"] == c.key and "pipeline" not in x]
        if mine and "p1" in summary and c.key in summary["p1"]["contenders"]:
            summary["p1"]["contenders"][c.key]["latency"] = {
                k: _median(mine, k)
                for k in ("visible_p50_ms", "visible_p99_ms", "append_p50_ms", "append_p99_ms")
            }
    return summary


def add_summaries(report: dict[str, Any]) -> None:
    """``summary`` (the headline tables, at the primary commit interval), ``by_interval``
    (the same per interval), ``latency_summary`` and ``interval_goals``, from the raw runs."""
    meta, runs = report["meta"], report["runs"]
    primary = meta["commit_interval"]
    intervals = meta.get("commit_intervals", [primary])

    def at(interval: float) -> list[dict[str, Any]]:
        return [r for r in runs if r.get("commit_interval", primary) == interval]

    report["summary"] = summarise(at(primary), report["latency"])
    report["by_interval"] = {f"{i:g}": summarise(at(i), []) for i in intervals}
    report["latency_summary"] = summarise_latency(report["latency"])
    report["interval_goals"] = interval_goals(runs, report["latency"], intervals)


def _ratios(
    runs: list[dict[str, Any]], num: str, den: str, field: str = "records_per_s"
) -> list[float]:
    """field(num) / field(den) per repetition (both measured in the same repetition); a
    repetition whose denominator measured 0 (too few records to register CPU time) has none."""
    by_rep: dict[int, dict[str, float]] = {}
    for r in runs:
        by_rep.setdefault(r["rep"], {})[r["contender"]] = r[field]
    return [
        by_rep[rep][num] / by_rep[rep][den]
        for rep in sorted(by_rep)
        if num in by_rep[rep] and den in by_rep[rep] and by_rep[rep][den]
    ]


def _ratio(
    runs: list[dict[str, Any]], num: str, den: str, field: str = "records_per_s"
) -> float | None:
    """Median over repetitions of field(num) / field(den) measured in the same repetition."""
    ratios = _ratios(runs, num, den, field)
    return float(statistics.median(ratios)) if ratios else None


def _fmt(value: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _other_intervals(meta: dict[str, Any]) -> str:
    others = [i for i in meta.get("commit_intervals", []) if i != meta["commit_interval"]]
    if not others:
        return ""
    return f" (also {', '.join(f'{i:g}' for i in others)} s: see *Throughput by commit interval*)"


def markdown(report: dict[str, Any]) -> str:
    meta, summary = report["meta"], report["summary"]
    lines = [
        "# eos-bridge benchmark",
        "",
        f"`{meta['command']}` — {meta['records']:,} input records x {meta['partitions']} "
        f"partitions per pipeline, commit interval {meta['commit_interval']} s for every "
        f"contender{_other_intervals(meta)}, {meta['reps']} interleaved repetitions (medians), "
        f"{meta['date']}, "
        f"{meta['machine']}.",
        "",
        "records/s = input records / (time the last output record was appended - time the "
        "first output record appeared). *to commit* = input records / (time the group had "
        "committed the input end offsets - time the first output record appeared): it also "
        "waits for the next commit after the work is done, up to one commit interval, so on "
        "short runs it moves by tens of percent with where the work ends in that interval. "
        "CPU s per million records over the same interval as records/s; peak RSS = VmHWM. "
        "Ratios are medians of per-repetition ratios of records/s against the peer measured "
        "in the same repetition.",
        "",
    ]
    for pipeline, data in summary.items():
        lines += [f"## {PIPELINE_TITLES.get(pipeline, pipeline)}", ""]
        lines += [
            "| contender | records/s | x eos-bridge EOS | to commit | CPU s / M records "
            "| peak RSS MB | start-up s | outputs (read_committed) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key, row in data["contenders"].items():
            lines.append(
                f"| {BY_KEY[key].label} | {_fmt(row['records_per_s'])} "
                f"| {_fmt(row['vs_bridge_eos'], '.2f')} "
                f"| {_fmt(row.get('committed_records_per_s'))} "
                f"| {_fmt(row['cpu_s_per_million'], '.1f')} "
                f"| {_fmt(row['peak_rss_mb'], '.0f')} | {_fmt(row['startup_s'], '.1f')} "
                f"| {row['outputs']:,} |"
            )
        lines.append("")
        for g, v in data["goals"].items():
            if v["ratio"] is None:  # the peer (or eos-bridge) was not in this run
                continue
            mine, peer = g.split("/")
            lines.append(
                f"- {BY_KEY[mine].label} / {BY_KEY[peer].label}: throughput "
                f"{_fmt(v['ratio'], '.2f')} (per repetition "
                f"{', '.join(f'{x:.2f}' for x in v.get('per_rep', []))}; {_goal(v)}); "
                f"CPU per record, peer / contender: {_fmt(v['cpu_ratio'], '.2f')} "
                "(above 1 = the contender is cheaper)"
            )
        lines.append("")
    p1 = summary.get("p1", {}).get("contenders", {})
    if any("latency" in row for row in p1.values()):
        lines += [
            f"## P1 end-to-end latency at {meta['latency_rate']:,} records/s",
            "",
            "visible = read_committed reader's receipt - input timestamp; append = output "
            "LogAppendTime - input timestamp (before the transaction commits).",
            "",
            "| contender | visible p50 ms | visible p99 ms | append p50 ms | append p99 ms |",
            "|---|---:|---:|---:|---:|",
        ]
        for key, row in p1.items():
            if "latency" in row:
                lat = row["latency"]
                lines.append(
                    f"| {BY_KEY[key].label} | {lat['visible_p50_ms']:.0f} "
                    f"| {lat['visible_p99_ms']:.0f} | {lat['append_p50_ms']:.0f} "
                    f"| {lat['append_p99_ms']:.0f} |"
                )
        lines.append("")
    lines += intervals_md(report) + latency_md(report)
    recovery = report.get("recovery")
    if recovery:
        lines += ["## State recovery (bench/bench_recovery.py)", "", f"`{recovery['command']}`", ""]
        lines += ["| changelog restore | records/s (wall clock) |", "|---|---:|"]
        lines += [f"| {k} | {v:,.0f} |" for k, v in recovery["restore_records_per_s"].items()]
        lines += ["", "```", *recovery["output"], "```", ""]
        if recovery.get("exit_code"):
            lines += [
                f"**The state benchmark failed (exit code {recovery['exit_code']})**: the "
                "figures above are what it printed before failing; see the bench log.",
                "",
            ]
    lines += NOTES
    lines += ["## Versions", ""]
    lines += [f"- {name}: {version}" for name, version in meta["versions"].items()]
    failed = [r for r in report["runs"] if "error" in r]
    if failed:
        lines += ["", "## Failed runs", ""]
        lines += [
            f"- {r['pipeline']} {r['contender']} rep {r['rep']}: {r['error'].splitlines()[0]}"
            for r in failed
        ]
    return "\n".join(lines) + "\n"


def chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = report["summary"]
    pipelines = list(summary)
    keys = [c.key for c in CONTENDERS]
    fig, ax = plt.subplots(figsize=(11, 5.5))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs, ys, lo, hi = [], [], [], []
        for j, pipeline in enumerate(pipelines):
            row = summary[pipeline]["contenders"].get(key)
            if row is None:
                continue
            xs.append(j + (i - (len(keys) - 1) / 2) * width)
            ys.append(row["records_per_s"])
            lo.append(row["records_per_s"] - row["records_per_s_min"])
            hi.append(row["records_per_s_max"] - row["records_per_s"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=BY_KEY[key].label)
    ax.set_xticks(range(len(pipelines)))
    ax.set_xticklabels([PIPELINE_TITLES.get(p, p) for p in pipelines], fontsize=9)
    ax.set_ylabel("input records/s (median, whiskers min-max)")
    meta = report["meta"]
    ax.set_title(
        f"eos-bridge vs Quix Streams vs hand-written loops — {meta['records']:,} records, "
        f"{meta['reps']} reps, commit interval {meta['commit_interval']} s",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "latest.md").write_text(markdown(report))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return  # the bench extra is not installed: tables only
    chart(report, out / "latest.png")
    latency_charts(report, out)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report [DIR]``: re-render latest.md and latest.png from latest.json."""
    import sys

    out = Path((argv if argv is not None else sys.argv[1:] or ["bench/results"])[0])
    report = json.loads((out / "latest.json").read_text())
    add_summaries(report)
    write(report, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
