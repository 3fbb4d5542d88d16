"""The faults a test hands to the bridge's composition (:class:`app.engine.faults.Faults`):
built here, by the test rig, never by the service from its settings or environment."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from app.engine.faults import Faults
from app.errors import CheckpointAborted

log = logging.getLogger(__name__)


def abort_every(k: int) -> Callable[[], None]:
    """Abort every ``k``-th checkpoint with records after its flush (the changelog records are
    in the log, the offsets never commit)."""
    seen = 0

    def after_flush() -> None:
        nonlocal seen
        seen += 1
        if seen % k == 0:
            raise CheckpointAborted(
                f"fault injection: aborting checkpoint #{seen}", "fault_injection"
            )

    return after_flush


def pause_when(path: Path) -> Callable[[Callable[[], None]], None]:
    """When ``path`` exists at a checkpoint: remove it, flush, and SIGSTOP this process, its
    transaction open with delivered records, before the offsets (the paused-zombie test)."""

    def before_offsets(flush: Callable[[], None]) -> None:
        if path.exists():
            path.unlink()
            flush()
            log.warning("test pause: stopping before the offsets of this checkpoint")
            os.kill(os.getpid(), signal.SIGSTOP)

    return before_offsets


def bridge_faults(
    abort_every_k: int = 0,
    pause_file: Path | None = None,
    shared_id: str | None = None,
    same_epoch_after_abort: bool = False,
) -> Faults:
    """The faults of the launcher's options (``tests.support.faulty_bridge``)."""
    base = Faults()
    return Faults(
        after_flush=abort_every(abort_every_k) if abort_every_k else base.after_flush,
        before_offsets=pause_when(pause_file) if pause_file else base.before_offsets,
        task_id=(lambda _task: shared_id) if shared_id else None,
        same_epoch_after_abort=same_epoch_after_abort,
    )
