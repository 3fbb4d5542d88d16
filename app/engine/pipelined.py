"""The pipelined checkpoint (``pipelined_commit``, off by default; issue 34).

Transaction T's offsets, flush and ``commit_transaction`` run on a helper thread (librdkafka
releases the GIL while it waits for the broker), while the main thread transforms the next
batch B **into memory**: its produce calls are kept in a list, its rows and failures held.
Nothing of B reaches the producer until T has committed and T+1 has begun; when T fails, B is
dropped unsent and the error goes to the ladder as any failed checkpoint's does (abort or a new
producer, then the rewind to the committed offsets reads T's and B's input again).

Why that keeps exactly-once (docs/benchmarks.md, "Pipelined checkpoint"):

* T's offsets stop before B (:meth:`Checkpoint.prepare` with ``ahead``), and B is produced
  only into T+1, whose offsets cover it: nothing of B is in T, nothing of T is in T+1.
* The main thread calls neither the consumer nor the producer while T is in flight, so no
  rebalance callback (they run inside ``consume``) can interleave with T, and a revoke never
  has to wait for an in-flight commit.
* Fencing is unchanged: T carries the group generation; B goes out under the same producer
  epoch in T+1, so a zombie fails at T or at T+1, and B with it.
* State: T's changelog records are produced, and T's updates set aside, before B is
  transformed (:meth:`Checkpoint.prepare`); B's updates go to a new dirty layer that reads
  over T's (``app.state.cache``). T's step 5 moves only T's updates to the read cache and
  RocksDB, with T's changelog offsets; B's wait for T+1's changelog records. When T fails,
  both layers are dropped (the ladder's discard) and the rewind reads T's and B's input again.
* One cluster (no per-partition producers), one output topic per batch (see
  :func:`pipelined_allowed`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from app.engine.checkpoint import Checkpoint, Pending
from app.kafka.ports import Message

T = TypeVar("T")
log = logging.getLogger(__name__)


class Overlap:
    """Runs one pipelined checkpoint: T's commit beside B's transformation."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._checkpoint = checkpoint

    def run(
        self, batch: list[Message], transform: Callable[[], T], emit: Callable[[T], None]
    ) -> bool:
        """Commit the open transaction while ``transform`` prepares ``batch``; ``emit`` it
        into the next transaction. False (nothing done) when there is nothing to commit: the
        caller then processes ``batch`` the ordinary way.

        Raises:
            whatever the commit raised (B dropped, not emitted), else whatever ``transform``
            or ``emit`` raised (after T's checkpoint was finished).
        """
        checkpoint = self._checkpoint
        pending = checkpoint.prepare(ahead=batch)
        if pending is None:
            return False
        failed: list[BaseException] = []
        worker = threading.Thread(
            target=_send, args=(checkpoint, pending, failed), name="checkpoint", daemon=True
        )
        worker.start()
        try:
            prepared = transform()
        except BaseException as exc:
            worker.join()
            if failed:
                raise failed[0] from exc
            checkpoint.finish(pending)
            raise
        worker.join()
        if failed:
            raise failed[0]  # B is dropped unsent; the ladder aborts T and rewinds
        checkpoint.finish(pending)
        emit(prepared)
        return True


def _send(checkpoint: Checkpoint, pending: Pending, failed: list[BaseException]) -> None:
    try:
        checkpoint.send(pending)
    except BaseException as exc:  # handed to the main thread, raised there
        failed.append(exc)


def pipelined_allowed(*, wanted: bool, exactly_once: bool, tasks: bool, per_topic: bool) -> bool:
    """The pipelined checkpoint runs only where the argument above holds: exactly-once, one
    cluster (no per-partition producers), one output topic per input."""
    return wanted and exactly_once and not tasks and not per_topic


def overlap(checkpoint: Checkpoint, *, wanted: bool, **where: bool) -> Overlap | None:
    """The loop's :class:`Overlap` when ``pipelined_commit`` is on and allowed ``where`` (the
    keywords of :func:`pipelined_allowed`); a warning when it is on but not allowed."""
    if pipelined_allowed(wanted=wanted, **where):
        log.info("pipelined_commit: each commit runs beside the next batch's pipeline")
        return Overlap(checkpoint)
    if wanted:
        log.warning(
            "pipelined_commit ignored: it needs exactly-once, one cluster and one output "
            "topic per batch"
        )
    return None
