"""Composition: settings and the start-up checks' record → clients, pipeline, state,
checkpoint, ladder → :class:`Bridge`.

The one place that knows every collaborator (Kafka Streams' ``StreamThread.create``). It makes
no network call: what the clusters and registries answered at start comes in as a
:class:`app.engine.preflight.Preflight`, and every Kafka client is made through
:class:`app.kafka.clients.Clients` (the unit tests hand in fakes). :mod:`app.engine.start`
runs the checks, this composition, then ``init_transactions``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING

from app import serde
from app.config import BridgeSettings
from app.engine.atomic import Atomic
from app.engine.checkpoint import Checkpoint
from app.engine.decoding import BatchDecoder
from app.engine.faults import NO_FAULTS, Faults
from app.engine.isolation import Isolation
from app.engine.ladder import Ladder
from app.engine.loop import Bridge, Collaborators, LoopSettings, Processing
from app.engine.outage import RegistryOutage
from app.engine.pipelined import overlap
from app.engine.preflight import Preflight, state_client
from app.engine.rebalance import Rebalancer
from app.engine.regroup import Regrouper
from app.engine.repair import PartitionRepair
from app.engine.stores import offset_store, reset_offset, stuck_after
from app.engine.tasks import TaskAssignment
from app.engine.transactions import Transactions, renews_epochs
from app.engine.watchdog import Watchdog
from app.kafka.catalog import TopicCatalog
from app.kafka.clients import KAFKA, Clients
from app.kafka.defaults import consumer_config, producer_config, retried_after
from app.kafka.ports import ConsumerPort, KafkaValue
from app.offsets import OffsetStore
from app.ops.health import Health
from app.ops.lag import LagReport
from app.ops.logs import librdkafka_logging
from app.ops.metrics import Metrics
from app.ops.progress import ProgressLog
from app.ops.resources import client_stats
from app.pipeline.builder import Pipeline, load_pipeline
from app.pipeline.spec import load_spec
from app.pipeline.split import Regroup
from app.pipeline.steps import fuse
from app.sink.collector import RecordCollector
from app.sink.deadletters import DeadLetters
from app.sink.output import Output
from app.state import NoState, StateBackend, StateConfig, make_backend

log = logging.getLogger(__name__)

# An open transaction may live this fraction of transaction.timeout.ms (app.engine.checkpoint).
_TXN_AGE_FRACTION = 0.6
_LIBRDKAFKA_BATCH_SIZE = 1_000_000  # librdkafka's default batch.size


def build_pipeline(settings: BridgeSettings) -> Pipeline:
    if settings.pipeline:
        return load_pipeline(settings.pipeline)
    if settings.pipeline_spec:
        return load_spec(settings.pipeline_spec)
    return Pipeline()  # passthrough


def state_root(settings: BridgeSettings) -> Path:
    """Where this group's databases live: ``<state_dir>/<group_id>``."""
    return settings.state_dir / settings.group_id


def state_config(settings: BridgeSettings) -> StateConfig:
    """What the state backend reads of the settings."""
    return StateConfig(
        state_root(settings),
        settings.group_id,
        settings.state_cache_max_bytes,
        settings.state_block_cache_bytes,
        state_client(settings),
        settings.startup_timeout,
    )


def make_state(
    settings: BridgeSettings, pipeline: Pipeline, facts: Preflight, clients: Clients = KAFKA
) -> StateBackend:
    """Per input partition, or per repartition partition when the pipeline regroups."""
    if not pipeline.stateful or facts.changelogs is None:
        return NoState()
    changelogs = facts.changelogs
    return make_backend(
        state_config(settings), changelogs.names, changelogs.admin, clients.admin, clients.consumer
    )


def compose(
    settings: BridgeSettings,
    pipeline: Pipeline,
    facts: Preflight,
    metrics: Metrics,
    health: Health,
    watchdog: Watchdog,
    *,
    replaying: bool = False,
    faults: Faults = NO_FAULTS,
    clients: Clients = KAFKA,
) -> Bridge:
    """Construct every collaborator from the settings and ``facts``; nothing is consumed
    until :meth:`Bridge.run`, and ``init_transactions`` is the caller's
    (:func:`app.engine.start.build`). ``faults``: a test rig's (:mod:`app.engine.faults`),
    never from settings."""
    plan = facts.plan
    batch_limit = min(facts.topic_limits.values(), default=None)
    formats = facts.formats
    outage = None
    if facts.registry is not None:
        outage = RegistryOutage(facts.registry, health, settings.call_timeout)
    common, consumer = producer_common(settings), _consumer(settings, clients)
    collector = RecordCollector(metrics=metrics)  # the producer is bound below
    pconf = _producer_config(settings, pipeline, common, batch_limit, collector)
    stuck = stuck_after(settings, facts.group_session_ms)
    offsets, tasks = offset_store(settings, pconf, watchdog, consumer, stuck, faults, clients)
    txn = _transactions(settings, pconf, consumer, offsets, tasks, watchdog, stuck, faults, clients)
    collector.rebind(txn.producer)
    output = _output(settings, facts, collector, pconf, consumer, metrics, health, replaying)
    state = make_state(settings, pipeline, facts, clients)
    checkpoint = _checkpoint(settings, consumer, txn, output, state, metrics, faults)
    return assemble(
        consumer,
        txn,
        output,
        pipeline,
        state,
        checkpoint,
        metrics,
        health,
        watchdog,
        _loop_settings(settings, replaying, plan),
        formats,
        reset_offset(settings),
        outage,
        tasks,
        Regrouper(plan, collector) if plan is not None else None,
    )


def _transactions(
    settings: BridgeSettings,
    pconf: dict[str, Any],
    consumer: ConsumerPort,
    offsets: OffsetStore,
    tasks: TaskAssignment | None,
    watchdog: Watchdog,
    stuck: float,
    faults: Faults,
    clients: Clients,
) -> Transactions:
    """The transaction owner: the one producer, or with two clusters the task producers."""
    return Transactions(
        (lambda: tasks.producers) if tasks is not None else (lambda: clients.producer(pconf)),
        consumer,
        offsets,
        exactly_once=settings.exactly_once,
        call_timeout=settings.call_timeout,
        watchdog=watchdog,
        reset_offset=reset_offset(settings),
        where=f"transaction coordinator of {settings.transactional_id!r}",
        stuck_after=stuck,
        # two clusters: each task producer renews its own epoch
        new_epoch_per_abort=tasks is None and renews_epochs(faults.same_epoch_after_abort),
        retried_after=retried_after(pconf),
    )


def _checkpoint(
    settings: BridgeSettings,
    consumer: Any,
    txn: Transactions,
    output: Output,
    state: StateBackend,
    metrics: Metrics,
    faults: Faults,
) -> Checkpoint:
    """When to commit: the interval, the record count and the age of an open transaction."""
    return Checkpoint(
        consumer,
        txn,
        output,
        state,
        metrics,
        interval=settings.commit_interval,
        every=settings.commit_every,
        flush_timeout=settings.transaction_timeout_ms / 1000 / 2,
        max_age=settings.transaction_timeout_ms / 1000 * _TXN_AGE_FRACTION,
        faults=faults,
    )


def _output(
    settings: BridgeSettings,
    facts: Preflight,
    collector: RecordCollector,
    pconf: dict[str, Any],
    consumer: Any,
    metrics: Metrics,
    health: Health,
    replaying: bool,
) -> Output:
    """What becomes of each row: codecs, size and route checks, dead letters."""
    formats = facts.formats
    lookup = facts.target_admin.list_topics if settings.cross_cluster else consumer.list_topics
    return Output(
        collector,
        settings.output_topics,
        settings.dead_letter_topic,
        settings.max_output_bytes,
        TopicCatalog(lookup, facts.topics),
        client_max_bytes=int(pconf.get("message.max.bytes", 1_000_000)),
        dead_letters=DeadLetters(
            metrics, health, settings.max_dead_letter_ratio, settings.dead_letter_ratio_window
        ),
        value_codec=formats.value_out,
        key_codec=formats.key_out,
        topic_max_bytes=dict(facts.topic_limits),
        replaying=replaying,
        keep_partition=facts.keep_partition,
        not_routable=() if settings.cross_cluster else settings.input_topics,
    )


def producer_common(settings: BridgeSettings) -> dict[str, KafkaValue]:
    """The producer's client settings (target cluster, logging, queue statistics)."""
    return {
        **settings.target_cluster().client_common(),
        **librdkafka_logging(),
        **client_stats("producer"),
    }


def _consumer(settings: BridgeSettings, clients: Clients) -> Any:
    """The group consumer, on the source cluster."""
    source = settings.source()
    return clients.consumer(
        consumer_config(
            source.bootstrap_servers,
            settings.group_id,
            settings.instance_id if settings.static_membership else None,
            {**source.client_common(), **librdkafka_logging(), **client_stats("consumer")},
            dict(settings.consumer),
            settings.group_protocol,
        )
    )


def _loop_settings(settings: BridgeSettings, replaying: bool, plan: Regroup | None) -> LoopSettings:
    hop = [] if plan is None else [plan.topic]  # consumed in the same group
    return LoopSettings(
        topics=settings.input_topics + hop,
        instance_id=settings.instance_id,
        batch_size=settings.batch_size,
        poll_timeout=settings.poll_timeout,
        retries=settings.record_retries,
        dead_letter=settings.on_error == "dlq",
        fused=not replaying,
        pipelined=settings.pipelined_commit,
        isolate_after=settings.isolation_after_aborts,
        incremental=settings.group_protocol == "consumer",
    )


def assemble(
    consumer: ConsumerPort,
    txn: Transactions,
    output: Output,
    pipeline: Pipeline,
    state: StateBackend,
    checkpoint: Checkpoint,
    metrics: Metrics,
    health: Health,
    watchdog: Watchdog,
    loop: LoopSettings,
    formats: serde.Formats | None = None,
    reset_offset: int = OFFSET_BEGINNING,
    outage: RegistryOutage | None = None,
    tasks: TaskAssignment | None = None,
    regroup: Regrouper | None = None,
) -> Bridge:
    """The engine's own collaborators around built clients: the hooks of the transaction
    owner, the ladder, the repairs and the rebalancer, the compiled pipeline, then the loop
    (the unit tests' rigs assemble fakes the same way)."""
    # An abort drops all uncommitted work: state cache, latched delivery errors, the count.
    for discard in (state.discard, output.reset, checkpoint.abandon):
        txn.on_abort(discard)
    txn.on_new_producer(output.collector.rebind)
    repair = PartitionRepair(
        consumer, txn.offsets, state, health, metrics, reset_offset, loop.incremental
    )
    isolation = Isolation(loop.isolate_after, loop.batch_size)
    checkpoint.on_commit(isolation.committed)
    checkpoint.on_commit(health.committed)
    ladder = Ladder(txn, output.refusals, metrics, repair, outage, isolation)
    rebalancer = Rebalancer(
        consumer, checkpoint, state, metrics, health, txn.offsets, ladder, tasks, loop.incremental
    )
    parts = Collaborators(
        consumer,
        txn,
        output,
        state,
        checkpoint,
        rebalancer,
        ladder,
        isolation,
        metrics,
        health,
        watchdog,
        ProgressLog(consumer, metrics),
        LagReport(
            consumer, metrics, committed=checkpoint.committed_positions, waiting=health.waiting
        ),
    )
    routing = tasks.producers if tasks is not None else None
    bridge = Bridge(
        parts, processing(pipeline, formats or serde.formats(), parts, loop, routing, regroup), loop
    )
    if outage is not None:
        outage.stop_when(lambda: bridge.stopping)
    return bridge


def processing(
    pipeline: Pipeline,
    formats: serde.Formats,
    parts: Collaborators,
    loop: LoopSettings,
    tasks: Any = None,
    regroup: Regrouper | None = None,
) -> Processing:
    """The pipeline compiled for the loop: the batch decoder, the steps on decoded rows, the
    atomic batches of a stateful pipeline, the fused path and the pipelined checkpoint."""
    output, state = parts.output, parts.state
    decode = BatchDecoder.of(pipeline, formats, loop.instance_id)
    steps = pipeline.steps if regroup is None else regroup.plan.tail
    atomic = Atomic.of(
        steps, state.access, output, decode if regroup is None else regroup.decode, loop, regroup
    )
    fused = None
    if loop.fused and regroup is None:
        fused = fuse(
            pipeline.steps, formats, output.fast_path_max_bytes, output.topic_exists, state.access
        )
    ahead = overlap(
        parts.checkpoint,
        wanted=loop.pipelined and not regroup,
        exactly_once=parts.txn.exactly_once,
        tasks=tasks is not None,
        per_topic=output.per_topic,
    )
    return Processing(decode, steps, atomic, fused, ahead, regroup, tasks)


def _producer_config(
    settings: BridgeSettings,
    pipeline: Pipeline,
    common: dict[str, KafkaValue],
    batch_limit: int | None,
    collector: RecordCollector,
) -> dict[str, Any]:
    pconf: dict[str, Any] = producer_config(
        settings.target_cluster().bootstrap_servers,
        settings.transactional_id if settings.exactly_once else None,
        settings.transaction_timeout_ms,
        errors_only_reports=not pipeline.stateful,
        common=common,
        extra=dict(settings.producer),
    )
    if batch_limit is not None and "batch.size" not in settings.producer:
        # Record-batch overhead (61 bytes) + headroom: a full batch always fits the topic.
        pconf["batch.size"] = min(_LIBRDKAFKA_BATCH_SIZE, max(1, batch_limit - 512))
    # Exactly-once with state: success reports stay on (the changelog writer reads its offsets
    # from them) but without a Python call per record: a record that fails delivery makes
    # commit_transaction fail with an abortable error naming its topic, partition and broker
    # error (tests/integration/test_localkafka.py pins that contract).
    if not (pipeline.stateful and settings.exactly_once):
        pconf["on_delivery"] = collector.on_delivery
    return pconf
