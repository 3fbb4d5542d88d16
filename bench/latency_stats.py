"""The arithmetic of the latency mode, kept free of Kafka so it is unit-tested on synthetic data.

Clock: the load producer stamps each input record with :class:`HostClock` milliseconds and the
read_committed reader reads the same clock on receipt. Both run on this host; the clock is the
wall clock at the start of the run plus the (system-wide) monotonic time elapsed since, so a
wall-clock step (NTP) during a run shifts no latency, and the stamps still read as epoch
milliseconds (the contenders carry them as record timestamps).

Matching: an input record is *visible* when the first output that covers it is visible. An
output covers the inputs of its ``group`` up to its ``seq``: P1 outputs carry the input's id
(group = id, seq = 0); P2 outputs carry the key's latest count and its source offset (group =
key, seq = offset), so a count that a contender coalesced into a later one (Kafka Streams'
record cache) becomes visible with the later one. An input never covered is *unseen*: it counts
as infinitely late in the percentiles, so unseen records can only raise them.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

QUANTILES = (50.0, 99.0, 99.9)


@dataclass(slots=True, frozen=True)
class HostClock:
    """Epoch milliseconds that never step: wall clock at the anchor + monotonic time since.

    ``time.monotonic`` is CLOCK_MONOTONIC, shared by every process of the host, so a clock built
    from the same anchor in another process reads the same time.
    """

    wall_s: float
    mono_s: float

    @classmethod
    def now_anchored(cls) -> HostClock:
        return cls(time.time(), time.monotonic())

    def ms(self, mono_s: float | None = None) -> float:
        mono = time.monotonic() if mono_s is None else mono_s
        return (self.wall_s + (mono - self.mono_s)) * 1000.0


def wall_drift_ms(clock: HostClock, wall_s: float, mono_s: float) -> float:
    """How far the wall clock moved from ``clock`` at (``wall_s``, ``mono_s``), in ms: non-zero
    when the wall clock was stepped or slewed during the run. Only broker timestamps (append
    times) are affected; visible latencies use ``clock`` alone."""
    return (wall_s - clock.wall_s - (mono_s - clock.mono_s)) * 1000.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100] of a non-empty sequence (sorted or not)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = math.ceil(q * len(ordered) / 100.0 - 1e-9)  # 99.9 * 1000 / 100 is not 999.0
    return ordered[max(0, min(len(ordered) - 1, rank - 1))]


@dataclass(slots=True, frozen=True)
class Sent:
    """One input record: the output ``group`` it belongs to, its order in it, its send time."""

    group: Hashable
    seq: int
    sent_ms: float


@dataclass(slots=True, frozen=True)
class Seen:
    """One output record read by the read_committed reader."""

    group: Hashable
    seq: int
    visible_ms: float


def visible_times(sent: Iterable[Sent], seen: Iterable[Seen]) -> list[float | None]:
    """For each input (in order): the earliest ``visible_ms`` of an output of its group with
    ``seq`` ≥ its own, or None (never covered)."""
    by_group: dict[Hashable, list[tuple[int, float]]] = {}
    for s in seen:
        by_group.setdefault(s.group, []).append((s.seq, s.visible_ms))
    # per group: seqs ascending, and the earliest visibility among outputs at or after each
    covers: dict[Hashable, tuple[list[int], list[float]]] = {}
    for group, outs in by_group.items():
        outs.sort()
        seqs = [q for q, _ in outs]
        earliest = [v for _, v in outs]
        for i in range(len(earliest) - 2, -1, -1):
            earliest[i] = min(earliest[i], earliest[i + 1])
        covers[group] = (seqs, earliest)
    result: list[float | None] = []
    for record in sent:
        found = covers.get(record.group)
        if found is None:
            result.append(None)
            continue
        i = bisect.bisect_left(found[0], record.seq)
        result.append(found[1][i] if i < len(found[0]) else None)
    return result


def summarise(
    sent: Sequence[Sent], seen: Iterable[Seen], window: tuple[float, float]
) -> dict[str, Any]:
    """Latency figures of the inputs sent within ``window`` (ms, [start, end)).

    Returns samples (inputs measured), unseen (never visible), negative (visible before sent:
    a clock error, not a fast contender), p50/p99/p99.9/max visible latency in ms (``inf`` when
    unseen inputs reach that rank).
    """
    measured = [s for s in sent if window[0] <= s.sent_ms < window[1]]
    if not measured:
        raise ValueError("no input record was sent in the measured window")
    latencies = [
        math.inf if v is None else v - s.sent_ms
        for s, v in zip(measured, visible_times(measured, seen), strict=True)
    ]
    out: dict[str, Any] = {
        "samples": len(latencies),
        "unseen": sum(1 for x in latencies if x == math.inf),
        "negative": sum(1 for x in latencies if x < 0),
    }
    for q in QUANTILES:
        out[f"p{q:g}_ms".replace(".", "_")] = percentile(latencies, q)
    out["max_ms"] = max(latencies)
    return out


def cdf(latencies: Sequence[float], points: int = 200) -> list[tuple[float, float]]:
    """(latency ms, share of records at or below it), at most ``points`` steps, finite only."""
    finite = sorted(x for x in latencies if x != math.inf)
    if not finite:
        return []
    n, total = len(finite), len(latencies)
    step = max(1, n // points)
    idx = list(range(step - 1, n, step))
    if idx[-1] != n - 1:
        idx.append(n - 1)
    return [(finite[i], (i + 1) / total) for i in idx]


def paced(base: int, elapsed_s: float, rate: float, sent: int, max_lag_s: float) -> tuple[int, int]:
    """The load producer's schedule: ``(base, due)``, due = records that should have been
    sent ``elapsed_s`` into the load (``base`` + elapsed x rate). A producer more than
    ``max_lag_s`` behind (a busy machine) drops that backlog, moving ``base`` back, rather
    than bursting above ``rate`` later: the achieved rate never exceeds the offered one."""
    due = base + int(elapsed_s * rate)
    lag = due - sent - int(rate * max_lag_s)
    return (base - lag, due - lag) if lag > 0 else (base, due)


def offered_rates(max_per_s: float, fractions: Sequence[float]) -> list[int]:
    """Offered loads (records/s) at ``fractions`` of a contender's own max throughput."""
    return [max(1, round(max_per_s * f)) for f in fractions]


def common_rate(
    max_by_contender: dict[str, float], reference: Sequence[str], fraction: float = 0.5
) -> int | None:
    """The one rate every contender is also measured at: ``fraction`` of the slowest
    ``reference`` contender's max throughput (Kafka Streams EOS in the bench), or of the
    slowest contender when none of ``reference`` was measured; None when nothing was."""
    ref = [v for k, v in max_by_contender.items() if k in reference and v > 0]
    pool = ref or [v for v in max_by_contender.values() if v > 0]
    return max(1, round(min(pool) * fraction)) if pool else None
