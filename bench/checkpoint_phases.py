"""Where a checkpoint's time goes: ``python -m bench.profile --tool phases`` runs the bridge as
``python -m bench.checkpoint_phases OUT.json -m app run ...``.

This module wraps the checkpoint's steps and the loop's phases (class attributes, before the
bridge is built) with two clocks, wall (``perf_counter``) and the main thread's CPU
(``thread_time``), runs ``app`` as ``__main__`` and writes the sums to ``OUT.json`` when the
process exits. Wall minus CPU inside a librdkafka call is the time the main thread sat blocked
in it (the GIL is released there). Nothing of it is imported by the bridge itself.
"""

from __future__ import annotations

import atexit
import functools
import json
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (module, class, attribute, phase name): every phase is one method call.
PHASES = (
    ("app.engine.loop", "Bridge", "_next_batch", "consume"),
    ("app.engine.loop", "Bridge", "_process_bounded", "pipeline + produce"),
    ("app.engine.checkpoint", "Checkpoint", "commit", "checkpoint (all)"),
    ("app.engine.loop", "Bridge", "_commit_ahead", "pipelined: checkpoint beside next batch"),
    ("app.engine.checkpoint", "Checkpoint", "send", "offsets + flush + commit"),
    ("app.engine.checkpoint", "Checkpoint", "finish", "checkpoints finished"),
    ("app.engine.checkpoint", "Checkpoint", "_positions", "positions"),
    ("app.state.manager", "RocksDBState", "produce_changelogs", "changelog produce"),
    ("app.sink.output", "Output", "flush", "flush"),
    ("app.engine.transactions", "Transactions", "commit", "send_offsets + commit"),
    ("app.offsets.group", "GroupOffsets", "put", "send_offsets_to_transaction"),
    ("app.state.manager", "RocksDBState", "after_commit", "state after commit (RocksDB)"),
    ("app.engine.transactions", "Transactions", "begin", "begin_transaction"),
    ("app.ops.metrics", "Metrics", "checkpoint_committed", "metrics"),
    ("app.ops.lag", "LagReport", "update", "lag gauge"),
)

_AHEAD = "pipelined: checkpoint beside next batch"  # its wall includes that batch's pipeline
_sums: dict[str, list[float]] = {}  # phase → [calls, wall s, main-thread CPU s]


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    sums = _sums.setdefault(name, [0, 0.0, 0.0])
    wall, cpu = time.perf_counter, time.thread_time

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        w, c = wall(), cpu()
        try:
            return fn(*args, **kwargs)
        finally:
            sums[0] += 1
            sums[1] += wall() - w
            sums[2] += cpu() - c

    return wrapper


def install() -> None:
    """Wrap every phase of :data:`PHASES` (each import is the bridge's own)."""
    import importlib

    for module, cls, attr, name in PHASES:
        owner = getattr(importlib.import_module(module), cls)
        setattr(owner, attr, _timed(name, getattr(owner, attr)))


def _write(out: Path, started: tuple[float, float]) -> None:
    totals = {"wall": time.perf_counter() - started[0], "cpu": time.thread_time() - started[1]}
    out.write_text(json.dumps({"phases": _sums, "process": totals}, indent=1))


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2:3] != ["-m"] or len(sys.argv) < 4:
        raise SystemExit("usage: python -m bench.checkpoint_phases OUT.json -m MODULE [ARGS]")
    install()
    atexit.register(_write, out, (time.perf_counter(), time.thread_time()))
    module = sys.argv[3]
    sys.argv = [module, *sys.argv[4:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def render(phases_json: Path, interval: float) -> str:
    """A table of the sums: per checkpoint (ms) and as a share of the processing loop."""
    data = json.loads(phases_json.read_text())
    phases: dict[str, list[float]] = data["phases"]
    looped = ("consume", "pipeline + produce", "checkpoint (all)", _AHEAD)
    loop = sum(phases.get(p, [0, 0.0])[1] for p in looped)
    n = max(1, int(phases.get("checkpoints finished", [0])[0]))
    rows = [
        f"commit interval {interval:g} s: {n} checkpoints; loop wall {loop:.2f} s "
        "(consume + pipeline + checkpoints; CPU = the calling thread's: with pipelined_commit, "
        "the helper thread's for offsets + flush + commit)",
        "",
        "| phase | calls | wall ms / checkpoint | thread CPU ms / checkpoint "
        "| blocked ms / checkpoint | % of loop wall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for _, _, _, name in PHASES:
        calls, wall, cpu = phases.get(name, [0, 0.0, 0.0])
        if not calls:
            continue
        rows.append(
            f"| {name} | {int(calls)} | {1000 * wall / n:.2f} | {1000 * cpu / n:.2f} "
            f"| {1000 * max(0.0, wall - cpu) / n:.2f} | {100 * wall / loop:.1f} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
