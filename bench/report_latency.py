"""The latency and commit-interval parts of the report: medians, goals, tables and plots."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from bench.contenders import BY_KEY, CONTENDERS

FIGURES = ("rate", "achieved_rate", "p50_ms", "p99_ms", "p99_9_ms", "max_ms")
BRIDGE_EOS = ("bridge-eos", "bridge-eos-spec")
KS = "kstreams-eos"
SHORT, LONG = 0.1, 1.0
ORDER = {c.key: i for i, c in enumerate(CONTENDERS)}


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def summarise_latency(latency: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians over repetitions per (pipeline, commit interval, contender, load)."""
    groups: dict[tuple[str, float, str, str], list[dict[str, Any]]] = {}
    for x in latency:
        if "pipeline" in x:  # entries of older reports have no pipeline: not this mode
            key = (x["pipeline"], x["commit_interval"], x["contender"], x["load"])
            groups.setdefault(key, []).append(x)
    rows = []
    for (pipeline, interval, contender, load), xs in groups.items():
        row: dict[str, Any] = {
            "pipeline": pipeline, "commit_interval": interval, "contender": contender,
            "load": load, "reps": len(xs), "unseen": sum(x["unseen"] for x in xs),
            "samples": sum(x["samples"] for x in xs), "drained": all(x["drained"] for x in xs),
        }  # fmt: skip
        row.update({f: _median([x[f] for x in xs]) for f in FIGURES})
        rows.append(row)
    load_order = {"25%": 0, "50%": 1, "75%": 2, "common": 3}
    rows.sort(
        key=lambda r: (r["pipeline"], r["commit_interval"], ORDER.get(r["contender"], 99),
                       load_order.get(r["load"], 9))
    )  # fmt: skip
    return rows


def _p99(rows: list[dict[str, Any]], pipeline: str, interval: float, c: str, load: str) -> Any:
    for r in rows:
        if (r["pipeline"], r["commit_interval"], r["contender"], r["load"]) == (
            pipeline, interval, c, load,
        ):  # fmt: skip
            return r["p99_ms"]
    return None


def _rps_by_rep(
    runs: list[dict[str, Any]], pipeline: str, interval: float
) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for r in runs:
        if r["pipeline"] == pipeline and r.get("commit_interval") == interval and "error" not in r:
            out.setdefault(r["rep"], {})[r["contender"]] = r["records_per_s"]
    return out


def _goal(what: str, value: float | None, goal: str, met: bool | None) -> dict[str, Any]:
    return {"what": what, "value": value, "goal": goal, "met": met}


def interval_goals(
    runs: list[dict[str, Any]], latency: list[dict[str, Any]], intervals: list[float]
) -> list[dict[str, Any]]:
    """Issue 34's acceptance items that one run can check (those whose inputs it measured)."""
    rows, goals = summarise_latency(latency), []
    for p in ("p1", "p2"):
        for mine in BRIDGE_EOS:
            ks = _p99(rows, p, SHORT, KS, "common")
            got = _p99(rows, p, SHORT, mine, "common")
            if ks is not None and got is not None:
                goals.append(_goal(
                    f"{p} @{SHORT:g}s common rate: {mine} p99 {got:.0f} ms vs {KS} {ks:.0f} ms",
                    got, f"≤ {ks:.0f} ms", got <= ks,
                ))  # fmt: skip
            got = _p99(rows, p, LONG, mine, "50%")
            if got is not None:
                bound = LONG * 1000 + 150
                goals.append(_goal(
                    f"{p} @{LONG:g}s 50% of own max: {mine} p99 {got:.0f} ms",
                    got, f"≤ {bound:.0f} ms", got <= bound,
                ))  # fmt: skip
            if SHORT in intervals and LONG in intervals:
                goals += _throughput_goals(runs, p, mine)
    return goals


def _throughput_goals(runs: list[dict[str, Any]], p: str, mine: str) -> list[dict[str, Any]]:
    short, long_ = _rps_by_rep(runs, p, SHORT), _rps_by_rep(runs, p, LONG)
    own = [short[r][mine] / long_[r][mine] for r in short
           if r in long_ and mine in short[r] and mine in long_[r]]  # fmt: skip
    vs_ks = [s[mine] / s[KS] for s in short.values() if mine in s and s.get(KS)]
    goals = []
    if own:
        v = _median(own)
        goals.append(_goal(f"{p} throughput @{SHORT:g}s / @{LONG:g}s, {mine}: {v:.2f}",
                           v, "≥ 0.95", v >= 0.95))  # fmt: skip
    if vs_ks:
        v = _median(vs_ks)
        goals.append(_goal(f"{p} throughput @{SHORT:g}s, {mine} / {KS}: {v:.2f}",
                           v, "≥ 3", v >= 3.0))  # fmt: skip
    return goals


def _ms(v: float) -> str:
    return "never" if math.isinf(v) else f"{v:,.0f}"


def _label(key: str) -> str:
    return BY_KEY[key].label if key in BY_KEY else key


def intervals_md(report: dict[str, Any]) -> list[str]:
    """Throughput per commit interval, each contender against its own primary-interval rate."""
    by = report.get("by_interval") or {}
    if len(by) < 2:
        return []
    names = list(by)
    primary = f"{report['meta']['commit_interval']:g}"
    lines = [
        "## Throughput by commit interval",
        "",
        "Medians of records/s at each commit interval (same method as above); *x own* = the "
        f"median per-repetition ratio to the same contender at {primary} s.",
        "",
        "| pipeline | contender | "
        + " | ".join(f"{n} s" for n in names)
        + " | "
        + " | ".join(f"x own @{n} s" for n in names if n != primary)
        + " |",
        "|---|---|" + "---:|" * (2 * len(names) - 1),
    ]
    runs = report["runs"]
    for pipeline in sorted({p for s in by.values() for p in s}):
        for c in CONTENDERS:
            rates = [by[n].get(pipeline, {}).get("contenders", {}).get(c.key) for n in names]
            if not any(rates):
                continue
            ratios = []
            for n in names:
                if n == primary:
                    continue
                a = _rps_by_rep(runs, pipeline, float(n))
                b = _rps_by_rep(runs, pipeline, float(primary))
                xs = [a[r][c.key] / b[r][c.key] for r in a
                      if r in b and c.key in a[r] and c.key in b[r]]  # fmt: skip
                ratios.append(f"{_median(xs):.2f}" if xs else "-")
            cells = [f"{r['records_per_s']:,.0f}" if r else "-" for r in rates]
            lines.append(f"| {pipeline} | {c.label} | " + " | ".join(cells + ratios) + " |")
    return [*lines, ""]


def latency_md(report: dict[str, Any]) -> list[str]:
    rows = report.get("latency_summary") or []
    if not rows:
        return []
    meta = report["meta"]
    lines = [
        "## End-to-end latency (offered load)",
        "",
        f"A producer at a fixed rate stamps each record's send time; a read_committed reader "
        f"on the output notes when each became visible. {meta.get('latency_seconds', 0):g} s "
        "measured per run after a warm-up; loads at 25/50/75 % of each contender's own max "
        "throughput at that commit interval (same repetition) and one common rate (half of "
        "Kafka Streams EOS's max unless `--latency-rate` is given). Medians over repetitions; "
        "*unseen* = records of the window never visible (counted as infinitely late, summed "
        "over repetitions). *achieved* well below *offered* means the load producer could not "
        "keep up (a loaded machine): read the row at the achieved rate.",
        "",
        "| pipeline | interval s | contender | load | offered /s | achieved /s "
        "| p50 ms | p99 ms | p99.9 ms | max ms | unseen |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['pipeline']} | {r['commit_interval']:g} | {_label(r['contender'])} "
            f"| {r['load']} | {r['rate']:,.0f} | {r['achieved_rate']:,.0f} | {_ms(r['p50_ms'])} "
            f"| {_ms(r['p99_ms'])} | {_ms(r['p99_9_ms'])} | {_ms(r['max_ms'])} "
            f"| {r['unseen']}{'' if r['drained'] else ' (not drained)'} |"
        )
    lines.append("")
    goals = report.get("interval_goals") or []
    if goals:
        lines += ["### Commit-interval goals (issue 34)", ""]
        lines += [
            f"- {g['what']} (goal {g['goal']}: {'met' if g['met'] else 'NOT met'})" for g in goals
        ]
        lines.append("")
    return lines


def latency_charts(report: dict[str, Any], out: Path) -> None:
    """``latest-latency.png`` (CDF per contender at the common rate, one panel per pipeline
    and interval) and ``latest-intervals.png`` (throughput against commit interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    curves = [x for x in report["latency"] if x.get("cdf")]
    panels = sorted({(x["pipeline"], x["commit_interval"]) for x in curves})
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5), squeeze=False)
        for ax, (p, interval) in zip(axes[0], panels, strict=True):
            for x in curves:
                if (x["pipeline"], x["commit_interval"]) == (p, interval) and x["rep"] == 0:
                    xs, ys = zip(*x["cdf"], strict=True)
                    ax.plot(xs, ys, label=f"{_label(x['contender'])} ({x['rate']:,}/s)")
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("produce-to-visible ms (read_committed)")
            ax.set_ylabel("share of records")
            ax.set_title(f"{p}, commit interval {interval:g} s, common rate", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "latest-latency.png", dpi=100)
        plt.close(fig)
    _interval_chart(report, out / "latest-intervals.png", plt)


def _interval_chart(report: dict[str, Any], path: Path, plt: Any) -> None:
    by = report.get("by_interval") or {}
    if len(by) < 2:
        return
    pipelines = sorted({p for s in by.values() for p in s})
    fig, axes = plt.subplots(1, len(pipelines), figsize=(5 * len(pipelines), 4.5), squeeze=False)
    xs = [float(n) for n in by]
    for ax, p in zip(axes[0], pipelines, strict=True):
        for c in CONTENDERS:
            ys = [by[n].get(p, {}).get("contenders", {}).get(c.key) for n in by]
            if all(ys):
                ax.plot(xs, [y["records_per_s"] for y in ys], marker="o", label=c.label)
        ax.set_xscale("log")
        ax.set_xlabel("commit interval s")
        ax.set_ylabel("records/s (median)")
        ax.set_title(p, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
