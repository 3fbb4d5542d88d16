"""Records for the spec tests, specs (b) and (c) under test (spec (a) is bench.spark_spec's,
so the benchmark measures the spec tested), with plain-Python references.

The records are nested JSON (``meta.device``), keyed by user so one user's events stay in
order in one partition, in two phases separated by more than the session gap. The references
are independent of Spark: their own JSON checks, window and session arithmetic and percentile
definition (nearest rank, what ``percentile_approx`` returns while every sample is kept).
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.kafka.topics import KafkaRecord
from spark_jobs.spec import AggregationSpec, parse_spec

MINUTE_MS = 60_000
SESSION_GAP_MS = 2 * MINUTE_MS
PHASE_MINUTES = 8  # each phase spans this many minutes; the phases are 4 minutes apart
PHASE_GAP_MINUTES = 4
USERS = ("ana", "bo", "cy", "di")
CLOCK = "clock"  # the user of the tick record
REGIONS = ("eu", "us")
DEVICES = ("ios", "web")
PAGES = ("home", "cart", "pay", "help", "faq")

BAD_VALUES: tuple[bytes, ...] = (
    b"{not json",
    b"[1, 2]",
    b'{"id": "b-1", "user": "ana", "region": "eu", "meta": {"device": "ios"}, "amount": 1.0}',
    b'{"id": "b-2", "user": "bo", "region": "us", "meta": {"device": "web"}, "amount": "lots",'
    b' "ts": 5, "page": "home"}',
    b'{"id": "b-3", "user": "cy", "region": "us", "meta": 7, "amount": 2.0, "ts": 5,'
    b' "page": "home"}',
)


def tick(last_ts: int) -> bytes:
    """A record far enough ahead in event time to move the watermark past every session, so
    the session spec (append mode: closed sessions only) emits them all. Bad for spec (a) (no
    region); for (b) a session of its own (user ``clock``) that stays open; for (c) a row of
    its own user. It passes (b)'s filter: Spark pushes a filter below the watermark, so rows
    the filter drops do not move event time."""
    ts = last_ts + 60 * MINUTE_MS + SESSION_GAP_MS + MINUTE_MS  # past the 1 hour watermark
    doc = {"id": "tick", "user": CLOCK, "page": "none", "amount": 1.0, "status": "paid"}
    return json.dumps({**doc, "meta": {"device": "none"}, "ts": ts}).encode()


@dataclass(slots=True, frozen=True)
class Click:
    id: str
    user: str
    region: str
    device: str
    page: str
    amount: float
    status: str | None
    ts: int

    def value(self) -> bytes:
        doc: dict[str, Any] = {
            "id": self.id,
            "user": self.user,
            "region": self.region,
            "meta": {"device": self.device, "v": 1},
            "page": self.page,
            "amount": self.amount,
            "ts": self.ts,
        }
        if self.status is not None:
            doc["status"] = self.status
        return json.dumps(doc).encode()


def make_clicks(seed: int, t0_ms: int, per_phase: int = 160) -> list[Click]:
    """Two phases of clicks in event-time order; within a phase a user's clicks are closer
    than the session gap, between phases farther apart."""
    rng = random.Random(seed)
    clicks = []
    for phase in range(2):
        start = t0_ms + phase * (PHASE_MINUTES + PHASE_GAP_MINUTES) * MINUTE_MS
        step = PHASE_MINUTES * MINUTE_MS // per_phase
        for i in range(per_phase):
            user = USERS[i % len(USERS)]
            clicks.append(
                Click(
                    id=f"c-{phase}-{i}",
                    user=user,
                    region=rng.choice(REGIONS),
                    device=rng.choice(DEVICES),
                    page=rng.choice(PAGES),
                    amount=rng.randrange(0, 400) / 4,
                    status=rng.choice(("paid", "paid", "void", None)),
                    ts=start + i * step,
                )
            )
    return clicks


def phase_bounds(t0_ms: int, phase: int) -> tuple[int, int]:
    """[start, end) event time of a phase, in epoch ms."""
    start = t0_ms + phase * (PHASE_MINUTES + PHASE_GAP_MINUTES) * MINUTE_MS
    return start, start + PHASE_MINUTES * MINUTE_MS


FIELDS = {
    "id": {"name": "id", "type": "string"},
    "user": {"name": "user", "type": "string"},
    "region": {"name": "region", "type": "string"},
    "device": {"name": "device", "type": "string", "path": "meta.device"},
    "page": {"name": "page", "type": "string"},
    "amount": {"name": "amount", "type": "double"},
    "status": {"name": "status", "type": "string", "required": False},
    "ts": {"name": "ts", "type": "long"},
}


def spec_b(topic: str) -> AggregationSpec:
    """(b) session window, exact distinct count, a filter and a derived column."""
    return parse_spec(
        {
            "name": "b",
            "input": {
                "topics": [topic],
                "fields": [FIELDS[n] for n in ("user", "page", "amount", "status", "ts")],
            },
            "derive": [{"name": "gross", "expr": "amount * 2"}],
            "filter": "status = 'paid' AND gross > 0",
            "event_time": {"column": "ts", "watermark": "1 hour"},
            "group_by": ["user"],
            "window": {"type": "session", "gap": "2 minutes"},
            "aggregates": [
                {"name": "clicks", "fn": "count"},
                {"name": "pages", "fn": "count_distinct", "column": "page"},
                {"name": "spend", "fn": "sum", "column": "gross"},
                {"name": "last_page", "fn": "last", "column": "page"},
            ],
        }
    )


def spec_c(topic: str) -> AggregationSpec:
    """(c) no window: running sum and count per user."""
    return parse_spec(
        {
            "name": "c",
            "input": {"topics": [topic], "fields": [FIELDS[n] for n in ("user", "amount")]},
            "group_by": ["user"],
            "aggregates": [
                {"name": "total", "fn": "sum", "column": "amount"},
                {"name": "n", "fn": "count"},
            ],
        }
    )


def typed(value: bytes | None, spec: AggregationSpec) -> dict[str, Any] | None:
    """The record's declared fields when it parses under ``spec``, else None (a bad row)."""
    try:
        doc = json.loads(value) if value is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    out: dict[str, Any] = {}
    for f in spec.input.fields:
        node: Any = doc
        for part in f.json_path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            if f.required:
                return None
            out[f.name] = None
            continue
        ok = {
            "string": isinstance(node, str),
            "long": isinstance(node, int) and not isinstance(node, bool),
            "double": isinstance(node, int | float) and not isinstance(node, bool),
        }[f.type]
        if not ok or (f.type == "double" and not math.isfinite(node)):
            return None
        out[f.name] = float(node) if f.type == "double" else node
    return out


def _rows(records: Iterable[KafkaRecord], spec: AggregationSpec) -> list[dict[str, Any]]:
    return [d for d in (typed(r.value, spec) for r in records) if d is not None]


def _nearest_rank(values: list[float], p: float) -> float:
    return values[max(0, math.ceil(p * len(values)) - 1)]


Row = dict[str, Any]


def reference_a(
    records: Iterable[KafkaRecord], spec: AggregationSpec
) -> dict[tuple[Any, ...], Row]:
    size, slide = 2 * MINUTE_MS, MINUTE_MS
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for d in _rows(records, spec):
        last_start = d["ts"] - d["ts"] % slide
        for start in range(last_start - size + slide, last_start + 1, slide):
            groups[(d["region"], d["device"], start)].append(d["amount"])
    out = {}
    for key, amounts in groups.items():
        amounts.sort()
        out[key] = {
            "window_end": key[2] + size,
            "n": len(amounts),
            "avg_amount": math.fsum(amounts) / len(amounts),
            "min_amount": amounts[0],
            "max_amount": amounts[-1],
            "amount_p50": _nearest_rank(amounts, 0.5),
            "amount_p90": _nearest_rank(amounts, 0.9),
        }
    return out


def reference_b(
    records: Iterable[KafkaRecord], spec: AggregationSpec
) -> dict[tuple[Any, ...], Row]:
    by_user: dict[str, list[Row]] = defaultdict(list)
    for d in _rows(records, spec):
        if d["status"] == "paid" and d["amount"] * 2 > 0:
            by_user[d["user"]].append(d)
    out = {}
    for user, rows in by_user.items():
        if user == CLOCK:
            continue  # its session is still open: not emitted
        rows.sort(key=lambda r: r["ts"])
        sessions: list[list[Row]] = []
        for row in rows:
            if sessions and row["ts"] < sessions[-1][-1]["ts"] + SESSION_GAP_MS:
                sessions[-1].append(row)
            else:
                sessions.append([row])
        for s in sessions:
            out[(user, s[0]["ts"])] = {
                "window_end": s[-1]["ts"] + SESSION_GAP_MS,
                "clicks": len(s),
                "pages": len({r["page"] for r in s}),
                "spend": math.fsum(r["amount"] * 2 for r in s),
                "last_page": s[-1]["page"],
            }
    return out


def reference_c(
    records: Iterable[KafkaRecord], spec: AggregationSpec
) -> dict[tuple[Any, ...], Row]:
    sums: dict[str, list[float]] = defaultdict(list)
    for d in _rows(records, spec):
        sums[d["user"]].append(d["amount"])
    return {(u,): {"total": math.fsum(a), "n": len(a)} for u, a in sums.items()}
