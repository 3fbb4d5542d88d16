"""Pipelines of the chaos tests (``BRIDGE_PIPELINE=tests.chaos.pipelines:<name>``).

``stall_once`` blocks inside a step, once per marker file the test writes: the test, not the
machine's speed, decides when the step stalls and when it goes on. The marker holds how many
records to let through first, so the stall can come after the transaction already holds
output (a batch is sent before the next one is transformed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from app.pipeline import Pipeline

_let_through: int | None = None  # records still to pass before the armed stall


def _stall_once(value: Any) -> Any:
    """Once ``$CHAOS_STALL_DIR/stall`` exists and the number of records it holds went through,
    write ``stalled`` (the test then knows the step is stuck), block until the test removes
    ``stall``, then remove ``stalled`` (the test then knows the step went on)."""
    global _let_through
    marker = Path(os.environ.get("CHAOS_STALL_DIR", "/nonexistent")) / "stall"
    if not marker.exists():
        _let_through = None
        return value
    if _let_through is None:
        _let_through = int(marker.read_text() or "0")
    _let_through -= 1
    if _let_through < 0:
        _let_through = None
        stalled = marker.with_name("stalled")
        stalled.write_text(str(os.getpid()))
        while marker.exists():
            time.sleep(0.05)  # the test removes the marker: no timing decided here
        stalled.unlink()
    return value


stall_once = Pipeline().map(_stall_once)


def _record_id(value: Any) -> Any:
    return value["id"]


# The soak's pipeline (tests/chaos/soak.py): keyed state (one entry per id) that grows until its
# TTL and then stays flat; the feed repeats one id in 100 a few seconds later, which it must
# drop (the oracle's repeats=True), and every other record passes. The
# TTL is short enough for the state (and RocksDB's bounded caches over it, filled as the sweeps'
# tombstones are compacted away) to reach its steady size within the soak's 15-minute warm-up:
# with 600 s RocksDB's memory was still rising at minute 33 (bench/results/soak-1h-d09720a).
# The feeds key each record by its id, so the state stays per input partition (no regrouping).
soak = Pipeline().dedupe(by=_record_id, ttl=120, name="seen", repartition=False)
