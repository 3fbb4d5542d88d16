"""The owner of a transaction's whole life: begin, commit, abort, rewind, new producer.

Kafka Streams' ``StreamsProducer`` in small. Exactly-once: input positions go into the
transaction through the offset store (:mod:`app.offsets`; today the source group with KIP-447
fencing). At-least-once: the producer is flushed, then the store commits the positions.
Every blocking client call runs under the watchdog's deadline (:mod:`app.engine.watchdog`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition, libversion

from app.engine.watchdog import Watchdog
from app.errors import CheckpointAborted, KafkaFatalError, ProducerFenced, forget_frames
from app.kafka.errors import RETRY_PAUSE_S, Reaction, bridge_error, classify, describe
from app.kafka.ports import ConsumerPort, NewProducer, ProducerPort
from app.offsets import OffsetStore

log = logging.getLogger(__name__)
T = TypeVar("T")

# The first librdkafka release with Transactions V2 (KIP-890 part 2: a new epoch per
# transaction, kept by the broker): none yet (confluentinc/librdkafka#5423 is open).
TV2_LIBRDKAFKA: tuple[int, int, int] | None = None

# The transactional calls whose request, retried after a timeout, could still land in a later
# transaction of the same epoch (the next commit is followed by a new epoch).
_ENDS_OR_JOINS = frozenset(
    ("send_offsets_to_transaction", "commit_transaction", "abort_transaction")
)

# The watchdog's deadline for a call = librdkafka's timeout argument + this margin: the call
# is given every chance to return by itself before the process is ended.
_GRACE_S = 15.0


def epoch_policy(libversion: str) -> tuple[bool, str]:
    """Whether the bridge must renew the producer epoch after each abort with librdkafka
    ``libversion``, and the start-up log line saying which protection is used."""
    try:
        version = tuple(int(part) for part in libversion.split("-")[0].split(".")[:3])
    except ValueError:
        version = ()
    if TV2_LIBRDKAFKA is not None and version >= TV2_LIBRDKAFKA:
        return False, f"transactions: librdkafka {libversion} speaks Transactions V2 (KIP-890)"
    return True, (
        f"transactions: librdkafka {libversion} has no Transactions V2 (KIP-890 part 2): "
        f"every abort is followed by a new producer epoch (init_transactions of a new producer)"
    )


def renews_epochs(same_epoch_fault: bool = False) -> bool:
    """Whether aborts are followed by a new epoch with the installed librdkafka
    (:func:`epoch_policy`); ``same_epoch_fault``: a test rig's fault turns it off."""
    return epoch_policy(libversion()[0])[0] and not same_epoch_fault


class Transactions:
    """Begin, commit (offsets included), abort and rewind, and re-create the producer.

    Args:
        new_producer: makes a producer (same transactional.id each time); called once now and
            once per re-creation.
        consumer: the group consumer whose partitions are rewound.
        offsets: where committed positions live (put into the transaction, read to rewind).
        exactly_once: transactional producer (True) or flush-then-commit (False).
        call_timeout: librdkafka timeout of each blocking call; retriable errors are retried
            until it has passed, then the outcome is unknown (fatal).
        watchdog: bounds each blocking call (``call_timeout`` + a margin).
        stuck_after: the watchdog's deadline per call instead (``stuck_call_timeout``).
        reset_offset: where a partition with no committed offset is rewound to.
        max_recreations: producer re-creations in a row without a commit in between before
            giving up (exit 3): a live twin would otherwise fence us forever.
        where: the coordinator a call talks to, for the watchdog's log line.
        new_epoch_per_abort: after each abort, the next transaction runs under a new producer
            epoch (:meth:`abort`); off only where the producer renews its own epochs (the task
            producers of two clusters) or in a test rig's fault.
        retried_after: seconds after which librdkafka sends a transactional request again by
            itself (:func:`app.kafka.defaults.retried_after`): a call that lasted that long is
            treated as retried (a new epoch after its commit), as one this class retried is.
    """

    def __init__(
        self,
        new_producer: NewProducer,
        consumer: ConsumerPort,
        offsets: OffsetStore,
        *,
        exactly_once: bool,
        call_timeout: float,
        watchdog: Watchdog,
        reset_offset: int = OFFSET_BEGINNING,
        max_recreations: int = 3,
        where: str = "",
        stuck_after: float | None = None,
        new_epoch_per_abort: bool = True,
        retried_after: float = 60.0,
    ) -> None:
        self._new_producer = new_producer
        self._retried_after = retried_after
        self._producer = new_producer()
        self._consumer = consumer
        self._offsets = offsets
        self.exactly_once = exactly_once
        self._timeout = call_timeout
        self._watchdog = watchdog
        self._reset_offset = reset_offset
        self._max_recreations = max_recreations
        self._where = where
        self._stuck_after = stuck_after or call_timeout + _GRACE_S
        self._recreations = 0
        self._new_epoch_per_abort = new_epoch_per_abort
        self.epoch_bumps = 0  # new epochs after aborts, for tests and the log
        self._timed_out: str | None = None  # a transactional call of this epoch timed out
        self._open = False
        self._discard: list[Callable[[], None]] = []
        self._rebind: list[Callable[[ProducerPort], None]] = []

    # ---- collaborators ---------------------------------------------------------------------

    def on_abort(self, discard: Callable[[], None]) -> None:
        """Call ``discard`` after every abort (uncommitted state, latched delivery errors)."""
        self._discard.append(discard)

    def on_new_producer(self, rebind: Callable[[ProducerPort], None]) -> None:
        """Call ``rebind(producer)`` whenever the producer is re-created."""
        self._rebind.append(rebind)

    @property
    def producer(self) -> ProducerPort:
        return self._producer

    @property
    def offsets(self) -> OffsetStore:
        """Where this transaction's input positions are committed."""
        return self._offsets

    # ---- the life of one transaction -------------------------------------------------------

    def init(self) -> None:
        """``init_transactions``: fences a predecessor with our transactional.id and aborts its
        open transaction at once."""
        if self.exactly_once:
            producer = self._producer
            self._call("init_transactions", lambda: producer.init_transactions(self._timeout))

    def begin(self) -> None:
        if self.exactly_once and not self._open:
            self._call("begin_transaction", self._producer.begin_transaction)
        self._open = True

    def commit(
        self, offsets: list[TopicPartition], settle: Callable[[], None] | None = None
    ) -> None:
        """Commit produced records and ``offsets`` (next offset to read per partition).

        Args:
            settle: the flush and its delivery checks; raising aborts the checkpoint. Exactly
                once, it runs after the offsets went into the transaction and before the commit,
                so the offsets' round trips (AddOffsetsToTxn, TxnOffsetCommit) overlap the last
                produce acknowledgements instead of following them: nothing of the transaction
                is visible before ``commit_transaction``, whichever comes first. At least once,
                it runs first: there the offsets are committed at once.
        """
        if not self.exactly_once:
            if settle is not None:
                settle()
            self._flush_and_commit_offsets(offsets)
        else:
            producer, timeout = self._producer, self._timeout
            if offsets:
                store = self._offsets
                self._call(
                    "send_offsets_to_transaction", lambda: store.put(producer, offsets, timeout)
                )
            if settle is not None:
                settle()
            self._call("commit_transaction", lambda: producer.commit_transaction(timeout))
            if offsets:
                self._offsets.after_commit(offsets)
        self._open = False
        self._recreations = 0
        if self._timed_out is not None and self._new_epoch_per_abort:
            self._after_timeout()

    def abort(self, reason: str, *, rewind: bool = True) -> None:
        """Abort the open transaction, drop uncommitted work, rewind, begin the next one.

        Exactly once, the next transaction runs under a new producer epoch: librdkafka has no
        Transactions V2 (KIP-890 part 2, :func:`epoch_policy`), so under the same epoch a
        produce request of the aborted transaction still in the network (delayed past
        ``request.timeout.ms``) could land in the next one and commit with it. A new producer's
        ``init_transactions`` bumps the epoch: the broker refuses that request as fenced. It
        costs one ``InitProducerId`` round trip and a producer per abort (docs/operations.md).
        A producer that cannot abort (fenced, fatal) is re-created the same way.

        Args:
            reason: logged.
            rewind: seek assigned partitions back to their committed offsets (not when the
                partitions are going away anyway).
        """
        log.warning("aborting transaction: %s", reason)
        try:
            was_open = self._abort_open()
        except ProducerFenced as exc:
            forget_frames(exc)  # they hold the fenced producer
            self.recreate(str(exc), rewind=rewind)
            return
        if was_open and self._new_epoch_per_abort:
            started = time.monotonic()
            self._renew(rewind)
            self.epoch_bumps += 1
            log.info(
                "new producer epoch after the abort (init_transactions of a new producer, %.0f ms)",
                (time.monotonic() - started) * 1000,
            )
            return
        self._discard_uncommitted()
        if rewind:
            self.rewind()
        self.begin()

    def recreate(self, reason: str, *, rewind: bool = True, counted: bool = True) -> None:
        """Replace a fenced or fatally failed producer (Kafka Streams: ``resetProducer``).

        The new producer's ``init_transactions`` bumps the epoch, so nothing the old one wrote
        in its open transaction can ever commit; then rewind and carry on.

        Args:
            reason: logged.
            rewind: as for :meth:`abort`.
            counted: counts towards ``max_recreations`` (not for a record the broker refused:
                that record's dead letter, not a twin, ends the series).

        Raises:
            KafkaFatalError: ``max_recreations`` re-creations in a row without a commit.
        """
        self._recreations += int(counted)
        if self._recreations > self._max_recreations:
            raise KafkaFatalError(
                f"producer re-created {self._max_recreations} times in a row without a "
                f"commit, last because: {reason}. Another live process may be using "
                f"transactional.id of this instance (check instance_id)"
            )
        log.warning(
            "re-creating the producer (%d/%d in a row): %s",
            self._recreations,
            self._max_recreations,
            reason,
        )
        self._renew(rewind)

    @property
    def reset_offset(self) -> int:
        """Where a partition without a committed offset starts (``auto.offset.reset``)."""
        return self._reset_offset

    def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset (none → reset policy)."""
        assignment = self._consumer.assignment()
        if not assignment:
            return
        committed = self._offsets.committed(assignment)
        targets = [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else self.reset_offset
            )
            for tp in committed
        ]
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                # All partitions in one pass, again after any failure: a message fetched in
                # between would otherwise move a rewound partition past it.
                for target in targets:
                    self._consumer.seek(target)
                return
            except Exception as exc:  # partition not fetching yet: serve the client, retry
                if time.monotonic() > deadline:
                    raise KafkaFatalError(f"cannot rewind to {targets}: {describe(exc)}") from exc
                self._consumer.consume(1, 0.05)

    def abort_quietly(self) -> None:
        """After a fatal error: abort what can be aborted; the broker aborts the rest."""
        try:
            self._abort_open()
        except Exception as exc:  # fenced/fatal producers cannot abort
            log.warning("abort on failure: %s", describe(exc))

    # ---- helpers ---------------------------------------------------------------------------

    def _renew(self, rewind: bool) -> None:
        """A new producer with the same transactional.id, initialised (a new epoch), then
        rewind and begin; a fenced ``init_transactions`` is a counted :meth:`recreate`."""
        self._open = False
        self._discard_uncommitted()
        if self._replace_producer(rewind):
            if rewind:
                self.rewind()
            self.begin()

    def _after_timeout(self) -> None:
        """A transactional call of the transaction just committed was retried: its first
        request may still be in the network (confluentinc/librdkafka#5423 names ``EndTxn``),
        and under the same epoch it could end the next transaction. The next one runs under a
        new epoch (nothing is uncommitted: no rewind)."""
        what = self._timed_out
        if self._replace_producer(rewind=False):
            self.epoch_bumps += 1
            log.info("new producer epoch: %s was retried in the transaction committed", what)

    def _replace_producer(self, rewind: bool) -> bool:
        """A new producer, bound and initialised; False when its init was fenced and
        :meth:`recreate` took over (it rewinds and begins itself)."""
        self._timed_out = None
        self._producer = self._new_producer()  # the old one is released with its last reference
        for rebind in self._rebind:
            rebind(self._producer)
        try:
            self.init()
        except ProducerFenced as exc:
            forget_frames(exc)
            self.recreate(str(exc), rewind=rewind)
            return False
        return True

    def _abort_open(self) -> bool:
        """Abort the open transaction, if any (exactly once); says whether one was open."""
        was_open = self.exactly_once and self._open
        if was_open:
            producer = self._producer
            try:
                self._call("abort_transaction", lambda: producer.abort_transaction(self._timeout))
            except CheckpointAborted as exc:  # abortable while aborting: nothing more to undo
                log.warning("abort_transaction reported %s", exc)
        self._open = False
        return was_open

    def _discard_uncommitted(self) -> None:
        for discard in self._discard:
            discard()

    def _flush_and_commit_offsets(self, offsets: list[TopicPartition]) -> None:
        with self._watchdog.guard("flush", self._stuck_after, "output brokers"):
            remaining = self._producer.flush(self._timeout)
        if remaining:
            raise CheckpointAborted(f"{remaining} records not delivered within {self._timeout}s")
        if not offsets:
            return
        try:
            self._offsets.commit(offsets)
        except KafkaException as exc:  # e.g. a rebalance: re-read, duplicates allowed
            raise CheckpointAborted(f"offset commit: {describe(exc)}") from exc

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one client call under the watchdog: retry retriable errors until the deadline,
        map the rest onto the exception tree (:func:`app.kafka.errors.classify`)."""
        started = time.monotonic()
        deadline = started + self._timeout
        pause = RETRY_PAUSE_S[0]
        while True:
            try:
                with self._watchdog.guard(what, self._stuck_after, self._where):
                    result = fn()
                if what in _ENDS_OR_JOINS and time.monotonic() - started >= self._retried_after:
                    # librdkafka timed its request out and sent it again inside the call: the
                    # first one may still land (a held EndTxn commits the next transaction)
                    self._timed_out = what
                return result
            except KafkaException as exc:
                reaction = classify(exc)
                if reaction is Reaction.RETRY and time.monotonic() < deadline:
                    log.warning("%s: retriable error %s; retrying", what, describe(exc))
                    if what in _ENDS_OR_JOINS:  # its request may still land: a new epoch next
                        self._timed_out = what
                    # A call that fails at once (e.g. CONCURRENT_TRANSACTIONS) is not asked
                    # again in a tight loop: librdkafka's own retry.backoff.ms, doubled to 1 s.
                    time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                    pause = min(pause * 2, RETRY_PAUSE_S[1])
                    continue
                if reaction is Reaction.RETRY:
                    raise KafkaFatalError(
                        f"{what} did not complete within {self._timeout:.0f}s "
                        f"({describe(exc)}): the outcome is unknown, exiting so a restart "
                        f"recovers through init_transactions"
                    ) from exc
                error = bridge_error(what, exc)
                if what == "commit_transaction" and isinstance(error, CheckpointAborted):
                    error.reason = "commit_failed"  # a delivery of this transaction failed
                try:
                    raise error from exc
                finally:
                    del error  # no cycle between this frame and the exception it raised
