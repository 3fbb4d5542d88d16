"""Seams where a test rig injects faults into the composition (:func:`app.engine.start.build`).

The service itself always composes :data:`NO_FAULTS`: no setting and no environment variable
reaches these seams (Kafka Streams keeps such hooks out of its public config too); the test
rig's launcher (``python -m tests.support.faulty_bridge``) hands in its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _nothing() -> None:
    return None


def _nothing_with(_flush: Callable[[], None]) -> None:
    return None


@dataclass(slots=True, frozen=True)
class Faults:
    """What a test wants to go wrong.

    Attributes:
        after_flush: called by a checkpoint with records once they are flushed (the records in
            the log, the offsets not yet sent); raising ``CheckpointAborted`` aborts it.
        before_offsets: called by a checkpoint before it sends the offsets, with a function
            that flushes the open transaction's records (a pause there leaves a zombie).
        task_id: two clusters: the transactional id of a task instead of the per-partition one
            (a shared id turns per-partition fencing off; the zombie test shows it then fails).
        same_epoch_after_abort: the next transaction keeps the aborted one's producer epoch
            (librdkafka's own behaviour without Transactions V2; a test shows what it allows).
    """

    after_flush: Callable[[], None] = _nothing
    before_offsets: Callable[[Callable[[], None]], None] = _nothing_with
    task_id: Callable[[int], str] | None = None
    same_epoch_after_abort: bool = False


NO_FAULTS = Faults()
