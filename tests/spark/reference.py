"""The aggregates computed in plain Python from records read back from Kafka.

Independent of Spark on purpose: its own JSON parsing, window arithmetic and percentile
definition (the smallest value with at least ``p`` of the values at or below it, which is what
``percentile_approx`` returns while every sample is kept).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from app.kafka.topics import KafkaRecord
from spark_jobs.config import KafkaRange

MAX_TS_MS = 253_402_300_799_999


@dataclass(slots=True, frozen=True)
class WindowStats:
    record_count: int
    amount_sum: float
    distinct_ids: int
    amount_p50: float
    amount_p95: float
    amount_p99: float


WindowKey = tuple[str, int]  # (key, window start in epoch ms)


def valid(value: bytes | None) -> dict[str, object] | None:
    """The decoded record when the Spark job must aggregate it, else None (a bad record)."""
    try:
        doc = json.loads(value) if value is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    ident, key, amount, ts = (doc.get(f) for f in ("id", "key", "amount", "ts"))
    if not isinstance(ident, str) or not isinstance(key, str):
        return None
    if not isinstance(amount, int | float) or isinstance(amount, bool):
        return None
    if not isinstance(ts, int) or not 0 <= ts <= MAX_TS_MS or not math.isfinite(amount):
        return None
    return doc


def nearest_rank(sorted_values: list[float], p: float) -> float:
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]


def aggregate(records: Iterable[KafkaRecord], window_ms: int) -> dict[WindowKey, WindowStats]:
    groups: dict[WindowKey, list[dict[str, object]]] = defaultdict(list)
    for record in records:
        doc = valid(record.value)
        if doc is not None:
            ts = int(doc["ts"])  # type: ignore[call-overload]
            groups[(str(doc["key"]), ts - ts % window_ms)].append(doc)
    out = {}
    for group, docs in groups.items():
        amounts = sorted(float(d["amount"]) for d in docs)  # type: ignore[arg-type]
        out[group] = WindowStats(
            record_count=len(docs),
            amount_sum=math.fsum(amounts),
            distinct_ids=len({d["id"] for d in docs}),
            amount_p50=nearest_rank(amounts, 0.5),
            amount_p95=nearest_rank(amounts, 0.95),
            amount_p99=nearest_rank(amounts, 0.99),
        )
    return out


def window_offsets(
    records: list[KafkaRecord], topic: str, first_ms: int, end_ms: int
) -> KafkaRange:
    """Per-partition offsets spanning exactly the events of windows in [first_ms, end_ms)."""
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    for r in records:
        doc = valid(r.value)
        if doc is not None and first_ms <= int(doc["ts"]) < end_ms:  # type: ignore[call-overload]
            p = str(r.partition)
            start[p] = min(start.get(p, r.offset), r.offset)
            end[p] = max(end.get(p, r.offset + 1), r.offset + 1)
    return KafkaRange(json.dumps({topic: start}), json.dumps({topic: end}))
