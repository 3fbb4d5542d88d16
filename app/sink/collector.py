"""The one writer: every record the bridge produces goes through :class:`RecordCollector`.

Output records, dead letters and changelog records (Kafka Streams' ``RecordCollectorImpl``):
one back-off loop for a full local queue, one latch for failed deliveries, one mapping of a
refused ``produce`` call onto :mod:`app.errors`, one place that counts what was sent.
What to write and what to do with a record that cannot be written stays with the callers
(:class:`app.sink.output.Output`, :class:`changelog.writer.ChangelogWriter`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from app.errors import CheckpointAborted, RecordTooLarge
from app.kafka.errors import describe, has_code, record_refused
from app.kafka.ports import Produce, ProducerPort, Room, TaskRouting
from app.ops.metrics import Metrics
from app.sink.refusals import Refusals

_FULL_QUEUE_WAIT_S = 0.05
_FLUSH_SLICE_S = 0.1
Headers = list[tuple[str, bytes]]
Delivered = Callable[[str, int, int], None]


class _Latch:
    """Delivery failures of one transaction.

    A fresh object per transaction: reports that arrive late for an aborted one (purged
    records) land on the old object and cannot fail the next checkpoint.
    """

    __slots__ = ("errors",)

    def __init__(self) -> None:
        self.errors: list[str] = []


class RecordCollector:
    """Produces every record into the open transaction of ``producer``.

    Args:
        producer: the transactional producer (replaced by :meth:`rebind`; none yet when the
            producer's own delivery callback is this collector's).
        metrics: where output records and dead letters are counted (None in some tests).
    """

    def __init__(
        self, producer: ProducerPort | None = None, metrics: Metrics | None = None
    ) -> None:
        self._producer: ProducerPort = producer or _Unbound()
        self._metrics = metrics
        self._latch = _Latch()
        self._out = 0  # output records produced since the last end_batch()
        self.refusals = Refusals()  # records the broker refused: dead-lettered on replay

    def rebind(self, producer: ProducerPort) -> None:
        """Write through ``producer`` from now on (the old one was fenced or failed)."""
        self._producer = producer

    # ---- delivery reports ------------------------------------------------------------------

    def on_delivery(self, err: Any, msg: Any) -> None:
        """Producer-level delivery callback: latch failures; :meth:`flush` raises them."""
        if err is not None:
            what = f"{describe(err)} (topic {msg.topic()} partition {msg.partition()})"
            self._latch.errors.append(what)
            if record_refused(err):
                self.refusals.note(err, msg.topic(), msg.key(), msg.value())

    # ---- produce ---------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Any,
        partition: int = -1,
        timestamp: int = 0,
    ) -> None:
        """One output record (counted at :meth:`end_batch`): to ``partition`` (-1: the
        partitioner's choice), with ``timestamp`` (ms; 0: now).

        Raises:
            RecordTooLarge: librdkafka refused it for its size (the caller dead-letters it).
            CheckpointAborted: the producer refused it for any other reason.
        """
        if self.refusals.diagnosing:  # name a refused record even without producer reports
            where = {"partition": partition, "timestamp": timestamp, "headers": headers}
            self._produce(topic, value, key, {**where, "on_delivery": self.on_delivery})
        else:
            try:  # positional: cheaper to parse than keywords
                if headers is None:
                    self._producer.produce(topic, value, key, partition, None, None, timestamp)
                else:
                    self._producer.produce(
                        topic, value, key, partition, None, None, timestamp, headers
                    )
            except BufferError:
                self._room(topic, value, key, headers, partition, timestamp)
            except KafkaException as exc:
                raise _refused(f"produce to {topic!r}", exc) from exc
        self._out += 1

    def send_alone(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Any, *where: int
    ) -> None:
        """One output record in a produce request of its own (flushed before and after), so
        that a refusal names this record alone (:mod:`app.sink.refusals`); ``where``: its
        partition and timestamp, as :meth:`send` takes them."""
        self._producer.flush(30)
        self.send(topic, value, key, headers, *where)
        self._producer.flush(30)

    def hooks(self) -> tuple[Produce, Room]:
        """For a loop that produces by itself (the fused path): the producer's own ``produce``
        (no wrapper on the hottest call) and the back-off for a full local queue. Count what
        it produced with :meth:`produced`; map a ``KafkaException`` it raised with
        :meth:`refusal`."""
        return self._producer.produce, self._room

    def produced(self, count: int) -> None:
        """``count`` records went out through :meth:`hooks`: count them, serve reports."""
        self._out += count
        self.end_batch()

    @staticmethod
    def refusal(topic: str, exc: KafkaException) -> CheckpointAborted:
        """The error for a ``produce`` to ``topic`` that the producer refused."""
        return _refused(f"produce to {topic!r}", exc)

    def _room(
        self, topic: str, value: bytes | None, key: Any, headers: Any, partition: int, ts: int
    ) -> None:
        self._when_room(
            topic, value, key, {"partition": partition, "timestamp": ts, "headers": headers}
        )

    def send_dead_letter(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Headers
    ) -> None:
        """One dead letter (counted at once).

        Raises:
            RecordTooLarge: librdkafka refused it for its size (the caller drops the value).
            CheckpointAborted: the producer refused it for any other reason.
        """
        self._produce(topic, value, key, {"headers": headers})
        if self._metrics is not None:
            self._metrics.dead_lettered.inc()

    def send_run(
        self,
        topic: str,
        partition: int,
        records: Mapping[bytes, bytes | None],
        headers: Headers,
        delivered: Delivered,
    ) -> None:
        """Changelog records (key → value, None = tombstone) to ``topic[partition]``, in order.

        Only the last record asks for a delivery report (one Python call per partition, not per
        record): its offset goes to ``delivered(topic, partition, offset)``, a failure to the
        latch. The others fail the transaction through the latch (producer-level reports) or
        through ``commit_transaction``, which refuses a transaction with a failed record.
        """
        if isinstance(self._producer, TaskRouting):  # two clusters: partition n is task n's
            self._producer.select(partition)
        latch, last = self._latch, len(records) - 1

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                latch.errors.append(f"{describe(err)} (changelog {topic}[{partition}])")
            else:
                delivered(msg.topic(), msg.partition(), msg.offset())

        produce, what = self._producer.produce, f"changelog produce to {topic}[{partition}]"
        callback = None
        for i, (key, value) in enumerate(records.items()):
            if i == last:
                callback = report
            try:
                # Positional (topic, value, key, partition, callback, on_delivery, timestamp,
                # headers): a third cheaper than keywords, on the checkpoint's hot loop.
                produce(topic, value, key, partition, callback, None, 0, headers)
            except BufferError:
                kwargs: dict[str, Any] = {"partition": partition, "headers": headers}
                if callback is not None:
                    kwargs["on_delivery"] = callback
                self._when_room(topic, value, key, kwargs, what)
            except KafkaException as exc:
                raise _refused(what, exc) from exc

    def end_batch(self) -> None:
        """Serve delivery reports, count the batch's output records."""
        self._producer.poll(0)
        if self._out and self._metrics is not None:
            self._metrics.records_out.inc(self._out)
        self._out = 0

    def _produce(self, topic: str, value: Any, key: Any, kwargs: dict[str, Any]) -> None:
        try:
            self._producer.produce(topic, value, key, **kwargs)
        except BufferError:
            self._when_room(topic, value, key, kwargs)
        except KafkaException as exc:
            raise _refused(f"produce to {topic!r}", exc) from exc

    def _when_room(
        self, topic: str, value: Any, key: Any, kwargs: dict[str, Any], what: str = ""
    ) -> None:
        """The local queue is full: serve deliveries, then produce again until it fits."""
        while True:
            self._producer.poll(_FULL_QUEUE_WAIT_S)
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                continue
            except KafkaException as exc:
                raise _refused(what or f"produce to {topic!r}", exc) from exc

    # ---- the checkpoint's side -------------------------------------------------------------

    def flush(self, timeout: float) -> None:
        """Wait for every delivery; raise :class:`CheckpointAborted` on any failure.

        Flushes in slices and stops at the first latched error: after a failed delivery the
        transaction must abort, and librdkafka holds the rest of the queue until it does.
        """
        latch = self._latch
        deadline = time.monotonic() + timeout
        remaining = self._producer.flush(min(timeout, _FLUSH_SLICE_S))
        while remaining and not latch.errors and time.monotonic() < deadline:
            remaining = self._producer.flush(min(deadline - time.monotonic(), _FLUSH_SLICE_S))
        self.refusals.raise_if_refused()
        if remaining and not latch.errors:
            raise CheckpointAborted(f"{remaining} records not delivered within {timeout}s")
        if latch.errors:
            first, count = latch.errors[0], len(latch.errors)
            self._latch = _Latch()
            raise CheckpointAborted(f"{count} delivery error(s), first: {first}")

    def reset(self) -> None:
        """The transaction was aborted: forget its latched errors and uncounted records;
        refused records are kept until their replay dead-letters them."""
        self._latch = _Latch()
        self._out = 0
        self.refusals.reset()


class _Unbound:
    """The producer before :meth:`RecordCollector.rebind`: any use is a wiring mistake."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"RecordCollector: {name}() before a producer was bound")


def _too_large_for_client(exc: BaseException | None) -> bool:
    """librdkafka refused a record synchronously for its size (a record error, not abortable)."""
    return exc is not None and has_code(exc, KafkaError.MSG_SIZE_TOO_LARGE)


def _refused(what: str, exc: KafkaException) -> CheckpointAborted:
    """The error for a record the producer refused; ``what`` names the call and topic."""
    message = f"{what} failed: {describe(exc)}"
    return RecordTooLarge(message) if _too_large_for_client(exc) else CheckpointAborted(message)
