"""A streaming job's results to a Kafka topic, exactly once for ``read_committed`` readers.

Spark's own Kafka sink is at-least-once: a micro-batch replayed after a crash is written
again. This sink writes each micro-batch in one Kafka transaction of a transactional
producer owned by the job (``transactional.id`` from the job's name):

1. at start, ``init_transactions`` fences the job's previous driver and aborts its open
   transaction; then the job reads (``read_committed``) the last batch id it committed,
   from its marker in the compacted ``<topic>.batches`` topic (key = the transactional id);
2. per micro-batch: the batch's rows (key = the merge key columns as a JSON object, value =
   the row as JSON, headers ``eosbridge.query`` and ``eosbridge.batch``) and the marker
   ``{"query_id", "batch_id"}`` are produced and committed in **one** transaction;
3. a batch whose id is not above the committed marker's (same query id) is skipped: Spark
   replayed it after a crash that came after its commit.

See docs/spark.md, "Kafka results".
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.errors import InfrastructureError, JobConfigError
from spark_jobs.faults import AFTER_KAFKA_COMMIT, BEFORE_KAFKA_COMMIT, NO_FAULTS, Faults
from spark_jobs.security import bridge_kafka_settings
from spark_jobs.spec import AggregationSpec

log = logging.getLogger("spark_jobs.results")

QUERY_HEADER = "eosbridge.query"
BATCH_HEADER = "eosbridge.batch"
TIMEOUT_S = 30.0
# Long enough for a large batch on a loaded machine; below the broker's default
# transaction.max.timeout.ms (15 minutes).
TRANSACTION_TIMEOUT_MS = 300_000
Headers = list[tuple[str, str | bytes | None]]
_SASL_ENV = (("BRIDGE_SASL_USERNAME", "sasl.username"), ("BRIDGE_SASL_PASSWORD", "sasl.password"))
_JSON = {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"}


@dataclass(slots=True, frozen=True)
class ResultsTarget:
    """Where the results go and how to reach the cluster (librdkafka settings)."""

    topic: str
    batches_topic: str
    transactional_id: str
    settings: tuple[tuple[str, str], ...] = field(repr=False)  # may hold a SASL password

    @classmethod
    def of(
        cls, spec: AggregationSpec, bootstrap: str, env: Mapping[str, str] | None = None
    ) -> ResultsTarget | None:
        """The target of ``spec.output.kafka`` (None: no Kafka output), with the bridge's
        security settings (spark_jobs.security) for the client."""
        out = spec.output.kafka
        if out is None:
            return None
        env = os.environ if env is None else env
        settings = {"bootstrap.servers": out.bootstrap_servers or bootstrap}
        settings.update(bridge_kafka_settings(env))
        for var, key in _SASL_ENV:
            if env.get(var) is not None:
                settings[key] = env[var]
        return cls(
            topic=out.topic,
            batches_topic=out.batches_topic or f"{out.topic}.batches",
            transactional_id=out.transactional_id or f"eos-bridge-spark-{spec.name}",
            settings=tuple(settings.items()),
        )


@dataclass(slots=True, frozen=True)
class Marker:
    """The last batch committed to the results topic, by the query that wrote it."""

    query_id: str
    batch_id: int


class KafkaResults:
    """The results side of one job: its producer and what it has committed."""

    def __init__(
        self, target: ResultsTarget, key_columns: list[str], faults: Faults = NO_FAULTS
    ) -> None:
        self.faults = faults
        self.target = target
        self.key_columns = key_columns
        self._producer: Producer | None = None
        self.last: Marker | None = None
        self.rows_written = 0

    def open(self) -> None:
        """Fence the job's previous driver, check the topics, read the last committed batch."""
        conf: dict[str, Any] = dict(self.target.settings)
        conf["transactional.id"] = self.target.transactional_id
        conf["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
        try:
            producer = Producer(conf)
        except KafkaException as exc:
            raise JobConfigError(
                f"output.kafka: the Kafka client refuses its settings ({_error(exc)})"
            ) from None
        _check_topics(producer, self.target)
        try:
            producer.init_transactions(TIMEOUT_S)
        except KafkaException as exc:
            raise InfrastructureError(
                f"output.kafka transactional id {self.target.transactional_id}: "
                f"init_transactions failed ({_error(exc)})"
            ) from None
        self._producer = producer
        self.last = read_marker(self.target)
        log.info("results to %s: last committed batch %s", self.target.topic, self.last)

    def committed(self, query_id: str, batch_id: int) -> bool:
        """Whether this query's batch ``batch_id`` is already in the results topic."""
        last = self.last
        return last is not None and last.query_id == query_id and batch_id <= last.batch_id

    def write(self, batch: DataFrame, query_id: str, batch_id: int) -> int:
        """Write the batch's rows and its marker in one transaction, unless already there."""
        if self.committed(query_id, batch_id):
            log.info("batch %d: already in %s, not written again", batch_id, self.target.topic)
            return 0
        assert self._producer is not None, "open() first"
        rows = json_rows(batch, self.key_columns)  # before the transaction: keep it short
        headers: Headers = [
            (QUERY_HEADER, query_id.encode()),
            (BATCH_HEADER, str(batch_id).encode()),
        ]
        marker = json.dumps({"query_id": query_id, "batch_id": batch_id}).encode()
        producer = self._producer
        try:
            producer.begin_transaction()
            for key, value in rows:
                _produce(producer, self.target.topic, key, value, headers)
            marker_key = self.target.transactional_id.encode()
            _produce(producer, self.target.batches_topic, marker_key, marker, headers)
            # Delivered before the commit (commit_transaction would flush them too), so a crash
            # here leaves them in the log inside the open transaction: what the fault point
            # before the commit is for.
            producer.flush(TIMEOUT_S)
            self.faults.at(BEFORE_KAFKA_COMMIT, batch_id)
            producer.commit_transaction(TIMEOUT_S)
        except KafkaException as exc:
            _abort(producer)
            raise InfrastructureError(
                f"output.kafka {self.target.topic}: batch {batch_id} not committed "
                f"({_error(exc)}); the restart writes it"
            ) from None
        self.last = Marker(query_id, batch_id)
        self.faults.at(AFTER_KAFKA_COMMIT, batch_id)
        self.rows_written += len(rows)
        return len(rows)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(TIMEOUT_S)
            self._producer = None


def json_rows(batch: DataFrame, key_columns: list[str]) -> list[tuple[bytes, bytes]]:
    """(key, value) JSON of each row; the key is the merge key columns, in order."""
    key = F.to_json(F.struct(*[F.col(c) for c in key_columns]), _JSON)
    value = F.to_json(F.struct(*[F.col(c) for c in batch.columns]), _JSON)
    pairs = batch.select(key.alias("k"), value.alias("v")).collect()
    return [(r.k.encode(), r.v.encode()) for r in pairs]


def _produce(producer: Producer, topic: str, key: bytes, value: bytes, headers: Headers) -> None:
    while True:
        try:
            producer.produce(topic, value, key, headers=headers)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.5)


def _abort(producer: Producer) -> None:
    try:
        producer.abort_transaction(TIMEOUT_S)
    except KafkaException:
        log.debug("abort after a failed commit failed too", exc_info=True)


def _error(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def _check_topics(producer: Producer, target: ResultsTarget) -> None:
    bootstrap = dict(target.settings)["bootstrap.servers"]
    for option, topic in (("topic", target.topic), ("batches_topic", target.batches_topic)):
        try:
            metadata = producer.list_topics(topic, timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise InfrastructureError(
                f"output.kafka: no broker at {bootstrap} answered within {TIMEOUT_S:g} s "
                f"({_error(exc)})"
            ) from None
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            hint = " (compacted, 1 partition)" if option == "batches_topic" else ""
            raise InfrastructureError(
                f"output.kafka.{option} {topic}: no such topic on {bootstrap} (create it{hint})"
            )


def read_marker(target: ResultsTarget, timeout_s: float = 120.0) -> Marker | None:
    """The last marker of ``target.transactional_id``, read ``read_committed``.

    Reads every partition up to its high watermark as of now; the position reaches it only
    once no open transaction holds the last stable offset below it, so a marker committed
    after another job's still open transaction is not missed (no stale answer).
    """
    consumer = _consumer(target, "read_committed")
    try:
        ends = _high_watermarks(target)
        consumer.assign(
            [TopicPartition(target.batches_topic, p, OFFSET_BEGINNING) for p in ends if ends[p]]
        )
        found: Marker | None = None
        deadline = time.monotonic() + timeout_s
        while not _reached(consumer, target.batches_topic, ends):
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"output.kafka.batches_topic {target.batches_topic}: could not read to its "
                    f"end within {timeout_s:g} s (an open transaction?)"
                )
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None and msg.key() == target.transactional_id.encode():
                    found = _marker(msg.value())
        return found
    finally:
        consumer.close()


def _consumer(target: ResultsTarget, isolation: str) -> Consumer:
    conf: dict[str, Any] = dict(target.settings)
    conf["group.id"] = f"eos-bridge-spark-marker-{uuid.uuid4().hex[:8]}"  # never committed
    conf["enable.auto.commit"] = False
    conf["auto.offset.reset"] = "earliest"
    conf["isolation.level"] = isolation
    return Consumer(conf)


def _high_watermarks(target: ResultsTarget) -> dict[int, int]:
    """Each partition's high watermark (a read_committed consumer would answer the last
    stable offset, which an open transaction holds back)."""
    topic = target.batches_topic
    consumer = _consumer(target, "read_uncommitted")
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT_S)
        return {
            p: _high_watermark(consumer, TopicPartition(topic, p))
            for p in sorted(metadata.topics[topic].partitions)
        }
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, tp: TopicPartition) -> int:
    """An end offset below 0 (librdkafka's "invalid", answered without an error while a broker
    was cut off) is asked again: taken for an end, the partition would go unread, its marker
    unseen, and the batch written twice."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        high: int = consumer.get_watermark_offsets(tp, TIMEOUT_S, False)[1]
        if high >= 0:
            return high
        if time.monotonic() >= deadline:
            raise InfrastructureError(
                f"output.kafka.batches_topic {tp.topic}[{tp.partition}]: no end offset within "
                f"{TIMEOUT_S:g} s (answered {high})"
            )
        time.sleep(0.2)


def _reached(consumer: Consumer, topic: str, ends: Mapping[int, int]) -> bool:
    wanted = [p for p, end in ends.items() if end > 0]
    if not wanted:
        return True
    positions = consumer.position([TopicPartition(topic, p) for p in wanted])
    return all(tp.offset >= ends[tp.partition] for tp in positions)


def _marker(value: bytes | None) -> Marker | None:
    if value is None:
        return None
    doc = json.loads(value)
    return Marker(str(doc["query_id"]), int(doc["batch_id"]))
