"""Pipelines of the chaos tests (``BRIDGE_PIPELINE=tests.chaos.pipelines:<name>``).

``stall_once`` blocks inside a step, once per marker file the test writes: the test, not the
machine's speed, decides when the step stalls and when it goes on.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from app.pipeline import Pipeline


def _stall_once(value: Any) -> Any:
    """When ``$CHAOS_STALL_DIR/stall`` exists, write ``stalled`` (the test then knows the step
    is stuck), block until the test removes ``stall``, then remove ``stalled`` (the test then
    knows the step went on and may arm the next stall)."""
    marker = Path(os.environ.get("CHAOS_STALL_DIR", "/nonexistent")) / "stall"
    if marker.exists():
        stalled = marker.with_name("stalled")
        stalled.write_text(str(os.getpid()))
        while marker.exists():
            time.sleep(0.05)  # the test removes the marker: no timing decided here
        stalled.unlink()
    return value


stall_once = Pipeline().map(_stall_once)
