"""Output: serialize rows, check sizes and routes, dead-letter what cannot be written.

What becomes of each row; the producing itself (back-off, delivery errors, counting) is the
one writer's, :class:`app.sink.collector.RecordCollector`, which changelog records share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from app.errors import (
    OutputNotEncodable,
    OutputRefused,
    OutputTooLarge,
    RecordError,
    RecordTooLarge,
)
from app.ops.late import LATE_LOG
from app.pipeline.errors import USER_ERRORS, InvalidRoute, UnknownRouteTopic, error_text
from app.pipeline.record import Failure, Row, header_bytes
from app.serde import BytesCodec, Codec, JsonCodec
from app.serde.json import LONG_INTEGER, rewritten
from app.sink.collector import RecordCollector
from app.sink.deadletters import DeadLetters
from app.sink.fitting import H_VALUE_DROPPED as H_VALUE_DROPPED
from app.sink.fitting import RECORD_OVERHEAD, fit
from app.sink.refusals import ALONE, Refusals

log = logging.getLogger(__name__)

# Dead-letter headers (also documented in the README).
H_TOPIC = "eos.dlq.source.topic"
H_PARTITION = "eos.dlq.source.partition"
H_OFFSET = "eos.dlq.source.offset"
H_TIMESTAMP = "eos.dlq.source.timestamp"  # the input's, for ``dlq replay``
H_CLASS = "eos.dlq.error.class"
H_MESSAGE = "eos.dlq.error.message"
H_STEP = "eos.dlq.error.step"
_LONG = OutputNotEncodable(f"cannot be encoded as JSON: {LONG_INTEGER}")


class Output:
    """Turns rows into output records and dead letters for ``collector`` to produce.

    Args:
        collector: the one writer (owns the producer).
        default_topic: where rows without a route go (``output_topic``): one topic, or one
            per input topic (``output_topic`` a template).
        dlq_topic: the dead-letter topic.
        max_bytes: ``max_output_bytes``; larger outputs are dead-lettered.
        topic_exists: answers from a cache whether a routed-to topic exists
            (:class:`app.kafka.catalog.TopicCatalog`); called once per routed record.
        client_max_bytes: the producer's ``message.max.bytes``.
        topic_max_bytes: ``max.message.bytes`` of the topics written, as read at start
            (output and DLQ topics; a routed-to topic's is not known, its broker may refuse);
            a record over its topic's or over ``client_max_bytes`` is refused before sending.
        replaying: the input is a dead-letter topic (``eos-bridge dlq replay``): its error
            headers are not written to the output, and become history in a new dead letter.
        dead_letters: counts dead letters for the summary lines, metrics and ratio check.
        value_codec: encodes output values (``output_format``; JSON by default).
        key_codec: encodes output keys (``output_key_format``; bytes by default).
        keep_partition: a row without a route goes to its input partition (otherwise the
            producer's partitioner places it by key). Every row keeps its input's timestamp.
        not_routable: topics a route must not name (the input topics of one cluster): a row
            routed there, to the DLQ or to an internal ``__*`` topic is ``InvalidRoute``.
    """

    def __init__(
        self,
        collector: RecordCollector,
        default_topic: str | Mapping[str, str],
        dlq_topic: str,
        max_bytes: int,
        topic_exists: Callable[[str], bool],
        client_max_bytes: int = 1_000_000,
        dead_letters: DeadLetters | None = None,
        value_codec: Codec | None = None,
        key_codec: Codec | None = None,
        topic_max_bytes: Mapping[str, int] | None = None,
        replaying: bool = False,
        keep_partition: bool = False,
        not_routable: Collection[str] = (),
    ) -> None:
        self.collector = collector
        self.value_codec = value_codec or JsonCodec()
        self.key_codec = key_codec or BytesCodec(lenient=True)
        # JSON output: a decoded big integer is refused (one find of "+" per row, and a closer
        # look only then: app.serde.json.rewritten)
        inline = self.value_codec.inline
        self._check_long = inline is not None and inline.json
        if isinstance(default_topic, str):
            self._default_topic, self._defaults = default_topic, None
        else:  # input topic → output topic
            self._defaults = dict(default_topic)
            self._default_topic = next(iter(self._defaults.values()))
        self._keep_partition = keep_partition
        self._per_topic = len({*(self._defaults or {}).values()}) > 1
        self._dlq_topic = dlq_topic
        self._max_bytes = max_bytes
        self._topic_exists = topic_exists
        self._not_routable = frozenset((*not_routable, dlq_topic))
        self._client_max_bytes = client_max_bytes  # the producer's message.max.bytes
        # What one record (key, value, headers) may weigh on its way to any topic written.
        limits = dict(topic_max_bytes or {})
        outputs = {self._default_topic, *(self._defaults or {}).values()}
        self._topic_limits = {
            t: min(client_max_bytes, limits.get(t, client_max_bytes)) for t in (*outputs, dlq_topic)
        }
        # Output topics (routed ones excepted): max_output_bytes or what the topic takes.
        self._output_limits = {
            t: min(max_bytes, self._topic_limits[t] - RECORD_OVERHEAD) for t in outputs
        }
        self._routed_limit = min(max_bytes, client_max_bytes - RECORD_OVERHEAD)
        self._replaying = replaying
        self._dead_letters = dead_letters
        # Inputs dead-lettered in the open transaction: a fan-out whose outputs fail twice
        # still puts its input in the DLQ once.
        self._dead: set[tuple[str, int, int]] = set()
        self._route_errors: dict[str, RecordError] = {}  # one error object per missing topic
        self._last_error: tuple[BaseException, str, list[tuple[str, bytes]]] | None = None

    @property
    def refusals(self) -> Refusals:
        """Records the broker refused (kept by the collector, dead-lettered here on replay)."""
        return self.collector.refusals

    def send(self, rows: list[Row], stop: bool = False) -> list[Failure]:
        """Produce ``rows``; returns those that cannot be written (route, encoding, size).

        The hot path of the general path: a row without a route, a key or headers costs one
        encode call and one produce call. ``stop``: produce nothing after the first row that
        cannot be written (a stateful batch, :mod:`app.engine.atomic`); the rows before it
        were produced.
        """
        failures: list[Failure] = []
        send, check_refused = self.collector.send, self.refusals.pending
        default, defaults, keep = self._default_topic, self._defaults, self._keep_partition
        limits, routed_limit = self._output_limits, self._routed_limit
        encode, encode_key = self.value_codec.encode, self.key_codec.encode
        check_long = self._check_long
        for row in rows:
            if failures and stop:
                break
            topic, key, partition = row.topic, row.key, -1
            if topic is None:
                topic = default if defaults is None else defaults.get(row.source_topic, default)
                if keep:
                    partition = row.partition
            elif not isinstance(topic, str) or not self._routable(topic):
                error = self._route_errors.get(topic) if isinstance(topic, str) else None
                failures.append(Failure(row, "route", error or self._bad_route(topic)))
                continue
            try:
                what = "value"
                payload = encode(row.value, topic)
                if key is not None and type(key) is not bytes:
                    what = "key"
                    key = encode_key(key, topic)
            except OutputNotEncodable as exc:
                failures.append(Failure(row, "output", _located(row, what, exc)))
                continue
            if (
                check_long
                and payload
                and payload.find(b"+") >= 0
                and rewritten(payload, row.value, row.raw)
            ):
                failures.append(Failure(row, "output", _located(row, "value", _LONG)))
                continue
            size = len(payload or b"") + len(key or b"")
            if row.headers:
                size += header_bytes(row.headers)
            # over max_output_bytes, or more than the topic takes
            if size > limits.get(topic, routed_limit):
                failures.append(Failure(row, "output", self._too_large(row, size, topic)))
                continue
            if self._replaying and row.headers:
                row.headers = [h for h in row.headers if not h[0].startswith(DLQ_PREFIX)] or None
            if check_refused and self._refused(row, (topic, partition), payload, key, failures):
                continue
            try:
                send(topic, payload, key, row.headers, partition, row.timestamp)
            except RecordTooLarge:
                failures.append(Failure(row, "output", self._too_large(row, size, topic)))
        self.collector.end_batch()
        return failures

    def _too_large(self, row: Row, size: int, topic: str) -> RecordError:
        where = f"output of {row.source_topic}[{row.partition}]@{row.offset}"
        if size > self._max_bytes:
            return OutputTooLarge(
                f"{where} is {size} bytes, over max_output_bytes={self._max_bytes}"
            )
        limit = self._topic_limits.get(topic, self._client_max_bytes)
        return OutputTooLarge(
            f"{where} is {size} bytes (key, value and headers), more than a record for {topic!r}"
            f" may be ({limit} bytes: the producer's message.max.bytes or the topic's "
            f"max.message.bytes, less framing)"
        )

    def _routable(self, topic: str) -> bool:
        """A route may send a record to ``topic``: it exists and is none the bridge reads,
        dead-letters to or Kafka keeps for itself (``__consumer_offsets``...)."""
        return (
            bool(topic)
            and topic not in self._not_routable
            and not topic.startswith("__")
            and self._topic_exists(topic)
        )

    def _bad_route(self, topic: Any) -> RecordError:
        if not isinstance(topic, str) or not topic:
            return InvalidRoute(
                f"route returned {topic!r} ({type(topic).__name__}); a route must return a "
                f"topic name (a non-empty string) or None for output_topic"
            )
        if topic in self._not_routable or topic.startswith("__"):
            what = "the dead-letter topic" if topic == self._dlq_topic else "an input topic"
            return InvalidRoute(
                f"route returned {topic[:200]!r}: "
                f"{'an internal topic of Kafka' if topic.startswith('__') else what}; a route "
                f"must not write there (the record would be refused or read again)"
            )
        if len(self._route_errors) >= 1000:
            self._route_errors.clear()  # routes naming ever new topics: stay bounded
        error = self._route_errors[topic] = UnknownRouteTopic(
            f"route target topic {topic[:200]!r} does not exist (the bridge never creates topics; "
            f"a topic created later is used within a few seconds)"
        )
        return error

    def _refused(
        self,
        row: Row,
        where: tuple[str, int],
        payload: bytes | None,
        key: bytes | None,
        failures: list[Failure],
    ) -> bool:
        """Handle ``row`` if the broker refused its output before (see :mod:`app.sink.refusals`):
        a confirmed refusal joins ``failures`` (dead letter), a suspect is produced alone."""
        topic, partition = where
        verdict = self.refusals.check((topic, key, payload))
        if verdict is None:
            return False
        if verdict == ALONE:
            self.collector.send_alone(topic, payload, key, row.headers, partition, row.timestamp)
            return True
        source = f"{row.source_topic}[{row.partition}]@{row.offset}"
        error = OutputRefused(f"output of {source} was refused by the broker: {verdict}")
        failures.append(Failure(row, "output", error))
        return True

    @property
    def fast_path_max_bytes(self) -> int:
        """Largest record :func:`app.pipeline.steps.fuse` may encode: half the output limit, so
        records near either size limit take the general path, which dead-letters them."""
        return min(self._output_limits.values()) // 2

    @property
    def topic_exists(self) -> Callable[[str], bool]:
        """Whether a route may name a topic (it exists, from the catalog's memory, and is no
        input, DLQ or internal topic), for the fused path."""
        return self._routable

    def default_topic(self, source_topic: str | None) -> str:
        """``output_topic``: where a row read from ``source_topic`` goes without a route."""
        if self._defaults is None:
            return self._default_topic
        return self._defaults.get(source_topic or "", self._default_topic)

    @property
    def per_topic(self) -> bool:
        """Rows of different input topics go to different output topics (a template)."""
        return self._per_topic

    @property
    def keep_partition(self) -> bool:
        """A row without a route goes to its input partition (``keep_partition``)."""
        return self._keep_partition

    def dead_letter(self, failure: Failure) -> None:
        """Write the failed record's original bytes to the DLQ with error headers (once per
        input record and transaction)."""
        row, error = failure.row, failure.error
        source = (row.source_topic, row.partition, row.offset)
        if source in self._dead:
            return
        self._dead.add(source)
        ours = [
            (H_TOPIC, row.source_topic.encode()),
            (H_PARTITION, str(row.partition).encode()),
            (H_OFFSET, str(row.offset).encode()),
            (H_TIMESTAMP, str(row.timestamp).encode()),
            *self._error_headers(error, failure.step),
        ]
        own = [(as_history(k), v) for k, v in row.headers or ()]
        letter = fit(row.raw, _dlq_key(row.key), own, ours, self._topic_limits[self._dlq_topic])
        if self._dead_letters is not None:
            self._dead_letters.add(failure)
        self.collector.send_dead_letter(self._dlq_topic, letter.value, letter.key, letter.headers)

    def _error_headers(self, error: BaseException, step: str) -> list[tuple[str, bytes]]:
        """Class, message and step headers; encoded once for a run of records that share one
        error object (a stream routed to a missing topic)."""
        if self._last_error is not None and self._last_error[:2] == (error, step):
            return self._last_error[2]
        encoded = [
            (H_CLASS, type(error).__name__.encode()),
            (H_MESSAGE, _text(error_text(error)[:2000])),
            (H_STEP, _text(step)),
        ]
        self._last_error = (error, step, encoded)
        return encoded

    def flush(self, timeout: float) -> None:
        """Wait for every delivery (:meth:`app.sink.collector.RecordCollector.flush`).

        Raises:
            CheckpointAborted: a record failed or is undelivered after ``timeout`` seconds.
        """
        self.collector.flush(timeout)

    def reset(self) -> None:
        """Forget latched errors and dead letters (after an abort they belong to the aborted
        transaction); refused records are kept until their replay dead-letters them."""
        self.collector.reset()
        self._dead.clear()
        LATE_LOG.discard()
        if self._dead_letters is not None:
            self._dead_letters.discard()

    def checkpoint_committed(self, consumed: int) -> None:
        """The transaction holding ``consumed`` input records committed: account for its
        dead letters (one summary line, metrics, the ratio check) and its late records (one
        line)."""
        self._dead.clear()
        LATE_LOG.flush()
        if self._dead_letters is not None:
            self._dead_letters.account(consumed)


DLQ_PREFIX = "eos.dlq."
HISTORY_PREFIX = "eos.dlq.history."


def as_history(name: str) -> str:
    """A dead letter's own ``eos.dlq.*`` header, kept as history when it fails again on
    replay (``eos.dlq.error.class`` → ``eos.dlq.history.error.class``; repeated headers keep
    every earlier failure, oldest first)."""
    if name.startswith(DLQ_PREFIX) and not name.startswith(HISTORY_PREFIX):
        return HISTORY_PREFIX + name[len(DLQ_PREFIX) :]
    return name


def _text(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")  # a message may quote a lone surrogate


def _dlq_key(key: Any) -> bytes | None:
    """The dead letter's key: the row's key as well as it can be encoded (it may be the very
    key that could not be)."""
    if key is None or isinstance(key, bytes):
        return key
    try:
        return _text(str(key))
    except USER_ERRORS:  # a key object whose str() raises: the source headers still identify it
        return None


def _located(row: Row, what: str, exc: OutputNotEncodable) -> OutputNotEncodable:
    """The codec's reason, with the output part and the input record it came from."""
    return OutputNotEncodable(
        f"output {what} of {row.source_topic}[{row.partition}]@{row.offset} {exc}"
    )
