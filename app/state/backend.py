"""The seam between the processing loop/checkpoint and the state machinery.

The loop calls these at fixed points; :class:`NoState` is the backend of stateless pipelines.
"""

from __future__ import annotations

from typing import Protocol

from app.state.access import StateAccess
from changelog.restore_task import RestoreProgress
from changelog.writer import RecordSink

TopicPartitionKey = tuple[str, int]


class StateBackend(Protocol):
    """What the loop and the checkpoint need from state.

    Call order per checkpoint: ``produce_changelogs`` (step 1, inside the transaction) →
    producer flush → ``verify_delivery`` (step 2) → offsets / commit → ``after_commit``
    (step 5, one WriteBatch per partition); on abort ``discard`` instead of ``after_commit``.
    """

    @property
    def stateful(self) -> bool:
        """False when the pipeline has no stateful step (nothing below does any work)."""
        ...

    @property
    def access(self) -> StateAccess | None:
        """What stateful steps use (``StepContext.state``); None without state."""
        ...

    def assign(self, partitions: list[TopicPartitionKey]) -> None:
        """Inside the rebalance callback: note partitions to recover; no I/O."""

    def revoke(self, partitions: list[TopicPartitionKey]) -> None:
        """After the revoke checkpoint committed: close these partitions' stores."""

    def lost(self, partitions: list[TopicPartitionKey]) -> None:
        """Partitions lost without a commit: drop their uncommitted cache, close stores."""

    def pending_recovery(self) -> list[TopicPartitionKey]:
        """Assigned partitions whose stores are not restored yet (kept paused by the loop)."""
        ...

    def recover(self, committed: dict[TopicPartitionKey, int], budget_s: float) -> bool:
        """Outside the callback: restore pending partitions from their changelogs for at most
        ``budget_s`` seconds. ``committed`` holds the group's committed input offset per
        pending partition (the filter rule's bound). True when nothing is pending any more."""
        ...

    def needs_checkpoint(self) -> bool:
        """True when the write-behind cache reached its byte cap."""
        ...

    def progress(self) -> list[RestoreProgress]:
        """Running restores: changelog partition, position, target (``.remaining``), counts."""
        ...

    def produce_changelogs(self, sink: RecordSink, positions: dict[TopicPartitionKey, int]) -> None:
        """Checkpoint step 1: produce changelog records for dirty keys into the open
        transaction and set those updates aside for step 5 (updates made after this call
        belong to the next checkpoint); ``positions`` = next input offset per partition. The
        records' header ``__processed_tp_offsets__`` is ``{topic: position - 1}`` (see
        changelog.format)."""

    def verify_delivery(self) -> None:
        """Checkpoint step 2, right after the producer flush (which raised any delivery
        failure): raise ``CheckpointAborted`` if a changelog partition's last record is still
        unconfirmed (its offset is what step 5 stores)."""

    def after_commit(self) -> None:
        """Checkpoint step 5: the updates set aside in step 1 (+ their changelog offsets) to
        the read cache and RocksDB."""

    def discard(self) -> None:
        """The transaction was aborted: forget every uncommitted update, set aside or not."""

    def wipe(self, partitions: list[TopicPartitionKey]) -> None:
        """State corrupted: delete these partitions' stores; they wait for recovery again."""

    def close(self) -> None:
        """Close every store."""


class NoState:
    """The backend of a stateless pipeline."""

    stateful = False
    access = None

    def assign(self, partitions: list[TopicPartitionKey]) -> None:
        pass

    def revoke(self, partitions: list[TopicPartitionKey]) -> None:
        pass

    def lost(self, partitions: list[TopicPartitionKey]) -> None:
        pass

    def pending_recovery(self) -> list[TopicPartitionKey]:
        return []

    def recover(self, committed: dict[TopicPartitionKey, int], budget_s: float) -> bool:
        return True

    def needs_checkpoint(self) -> bool:
        return False

    def progress(self) -> list[RestoreProgress]:
        return []

    def produce_changelogs(self, sink: RecordSink, positions: dict[TopicPartitionKey, int]) -> None:
        pass

    def verify_delivery(self) -> None:
        pass

    def after_commit(self) -> None:
        pass

    def discard(self) -> None:
        pass

    def wipe(self, partitions: list[TopicPartitionKey]) -> None:
        pass

    def close(self) -> None:
        pass
