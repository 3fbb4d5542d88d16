"""The one reaction ladder: what every exception the engine meets means.

Kafka Streams' ``StreamThread.runLoop`` and ``TaskManager`` in small. The loop, the revoke and
lost callbacks and the shutdown all hand their exceptions here; nothing else decides to
abort, re-create the producer or give up, and nothing else labels the abort metric::

    CheckpointAborted or ProducerFenced   → first counted by poison isolation (app.engine.
                                            isolation: K in a row narrow the batches)
    CheckpointAborted, a record refused   → a new producer (its epoch), rewind; not counted
    CheckpointAborted                     → abort, drop uncommitted work, rewind
    ProducerFenced                        → a new producer (init_transactions), rewind; bounded
    PartitionsMigrated                    → abort (the partitions go; the rest is rewound)
    OffsetsUnfetched                      → abort, assign again at the committed offsets
    StateCorrupted with partitions        → abort, wipe and restore those partitions
    RegistryUnavailable                   → abort, rewind, wait until the registry answers
                                            (app.engine.outage; exit 3 past its deadline)
    anything else (KafkaFatalError, RecordError, InstanceFenced, StateCorrupted without
    partitions)                           → raised: the process exits with its code
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException

from app.engine.isolation import Isolation
from app.engine.outage import RegistryOutage
from app.engine.repair import PartitionRepair
from app.engine.transactions import Transactions
from app.errors import (
    BridgeError,
    CheckpointAborted,
    KafkaFatalError,
    OffsetsUnfetched,
    PartitionsMigrated,
    ProducerFenced,
    StateCorrupted,
)
from app.kafka.errors import bridge_error, describe
from app.ops.metrics import Metrics
from app.serde.registry_settings import RegistryUnavailable
from app.sink.refusals import Refusals

log = logging.getLogger(__name__)


class Ladder:
    """Decides and carries out the reaction to one exception (see the module docstring)."""

    def __init__(
        self,
        txn: Transactions,
        refusals: Refusals,
        metrics: Metrics,
        repair: PartitionRepair,
        outage: RegistryOutage | None = None,
        isolation: Isolation | None = None,
    ) -> None:
        self._txn = txn
        self._refusals = refusals
        self._metrics = metrics
        self._repair = repair
        self._outage = outage  # None: no registry format, so no such outage
        self._isolation = isolation  # aborts in a row without a commit narrow the batches

    def react(self, exc: BaseException, *, rewind: bool = True) -> None:
        """React to ``exc``, or raise it (mapped) when nothing in-process helps.

        Args:
            rewind: seek the assigned partitions back to their committed offsets (not when
                they are being revoked or were lost: they go anyway).
        """
        if isinstance(exc, KafkaException):  # raised by a client call nobody mapped (flush...)
            exc = bridge_error("producer", exc)
        if self._isolation is not None and isinstance(exc, CheckpointAborted | ProducerFenced):
            self._isolation.aborted(exc)  # whatever the error: exit 3 past the bound
        if isinstance(exc, CheckpointAborted) and self._refusals.refused_in_txn:
            # The broker refused a record: it goes to the DLQ on replay (app.sink.refusals).
            # After a refusal librdkafka's idempotence state needs a new epoch ("skipped
            # sequence numbers" otherwise), so a fresh producer takes over rather than an abort.
            self._recreate("record_refused", exc, rewind, counted=False)
        elif isinstance(exc, CheckpointAborted):
            if exc.reason == "commit_failed":  # maybe a refused record nobody reported
                self._refusals.diagnose_replay()
            self._abort(exc.reason, exc, rewind)
        elif isinstance(exc, ProducerFenced):
            self._recreate("producer_recreated", exc, rewind)
        elif isinstance(exc, PartitionsMigrated):
            self._abort(exc.reason, exc, rewind)
        elif isinstance(exc, OffsetsUnfetched):
            self._abort("offsets_unfetched", exc, rewind=False)
            self._repair.reassign_at_committed()
        elif isinstance(exc, StateCorrupted) and exc.partitions:
            self._abort("state_corrupted", exc, rewind)
            self._repair.restore_again(exc.partitions)
        elif isinstance(exc, RegistryUnavailable) and self._outage is not None:
            self._abort("registry_unavailable", exc, rewind)
            self._outage.wait(exc)
        elif isinstance(exc, StateCorrupted):
            raise KafkaFatalError(f"local state corrupted: {exc}") from exc
        else:
            raise exc

    def react_at_close(self, exc: BaseException) -> None:
        """The final checkpoint failed: a failed commit is replayed by the next owner of
        these partitions (the caller aborts what is open); anything worse is raised."""
        if not isinstance(exc, CheckpointAborted | ProducerFenced | KafkaException):
            raise exc
        log.warning(
            "final checkpoint aborted (%s): what was processed since the last commit is "
            "replayed by the next owner of these partitions",
            describe(exc),
        )

    def _abort(self, label: str, exc: BridgeError, rewind: bool) -> None:
        self._metrics.aborts.labels(label).inc()
        self._txn.abort(str(exc), rewind=rewind)

    def _recreate(
        self, label: str, exc: BridgeError, rewind: bool, *, counted: bool = True
    ) -> None:
        self._metrics.aborts.labels(label).inc()
        self._txn.recreate(str(exc), rewind=rewind, counted=counted)
