"""Composition: settings → clients, pipeline, state, checkpoint, ladder → :class:`Bridge`.

The one place that knows every collaborator (Kafka Streams' ``StreamThread.create``), plus
the start-up checks (broker reachable, topics exist, ACLs) that run before anything is built.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from app import serde
from app.config import BridgeSettings, Cluster
from app.engine.checkpoint import Checkpoint
from app.engine.faults import NO_FAULTS, Faults
from app.engine.isolation import Isolation
from app.engine.ladder import Ladder
from app.engine.loop import Bridge, LoopSettings
from app.engine.outage import RegistryOutage
from app.engine.rebalance import Rebalancer
from app.engine.regroup import Regrouper
from app.engine.repair import PartitionRepair
from app.engine.repartition import prepare_repartition, regroup_plan
from app.engine.stores import offset_store, reset_offset, stuck_after
from app.engine.tasks import TaskAssignment
from app.engine.transactions import Transactions
from app.engine.watchdog import Watchdog
from app.errors import KafkaFatalError
from app.kafka.access import check_acls, connect, transactional_access_error
from app.kafka.admin import partition_counts, refuse_compacted_dlq, require_topics
from app.kafka.catalog import TopicCatalog
from app.kafka.defaults import consumer_config, producer_config
from app.kafka.errors import describe
from app.kafka.naming import keeps_partition, partition_mismatches
from app.kafka.ports import ConsumerPort, KafkaValue
from app.ops.health import Health
from app.ops.logs import librdkafka_logging
from app.ops.metrics import Metrics
from app.ops.resources import client_stats
from app.pipeline.builder import Pipeline, load_pipeline
from app.pipeline.spec import load_spec
from app.pipeline.split import Regroup
from app.serde import Role
from app.sink.collector import RecordCollector
from app.sink.deadletters import DeadLetters
from app.sink.output import Output
from app.state import NoState, StateBackend, make_backend

if TYPE_CHECKING:
    from app.serde.registry_codec import RegistryCodec

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


def preflight(
    settings: BridgeSettings, pipeline: Pipeline
) -> tuple[set[str], dict[str, int], AdminClient, bool]:
    """Check each cluster answers (TLS and credentials included), the topics exist and the
    principal may read the inputs and the group on the source and write the outputs on the
    target (app.kafka.access: one line per problem, at once). One cluster: one check.

    Returns:
        every topic name of the target, ``max.message.bytes`` of each topic the bridge writes
        (those it may read), an admin client of the target, and whether records keep their
        input partition (``keep_partition``; ``true`` with other counts: exit 2, one line each).
    """
    wanted = wanted_topics(settings)
    read = [w for w in wanted if w[0] == "input_topics"]
    written = [w for w in wanted if w[0] != "input_topics"]
    if settings.cross_cluster:
        source, _ = _check_cluster(settings, settings.source(), read, [])
        admin, existing = _check_cluster(settings, settings.target_cluster(), [], written)
    else:
        admin, existing = _check_cluster(settings, settings.source(), read, written)
        source = admin
    limits = _topic_limits(admin, [t for _, t in written], settings.startup_timeout)
    if settings.on_error == "dlq":
        refuse_compacted_dlq(admin, settings.dead_letter_topic, settings.startup_timeout)
    return existing, limits, admin, _keep_partition(settings, pipeline, source, admin)


def _keep_partition(
    settings: BridgeSettings, pipeline: Pipeline, source: AdminClient, target: AdminClient
) -> bool:
    """``keep_partition``: true, false, or auto (equal partition counts, no ``key_by``)."""
    if settings.keep_partition is False or (settings.keep_partition == "auto" and pipeline.rekeys):
        return False  # a key_by's outputs go where their new key hashes to
    outputs, timeout = settings.output_topics, settings.startup_timeout
    mismatches = partition_mismatches(
        outputs, partition_counts(source, outputs, timeout),
        partition_counts(target, outputs.values(), timeout),
    )  # fmt: skip
    keep = keeps_partition(settings.keep_partition, mismatches)
    log.info("records %s their input partition", "keep" if keep else "do not keep")
    return keep


def _check_cluster(
    settings: BridgeSettings,
    cluster: Cluster,
    read: list[tuple[str, str]],
    written: list[tuple[str, str]],
) -> tuple[AdminClient, set[str]]:
    conf = {
        "bootstrap.servers": cluster.bootstrap_servers,
        **cluster.client_common(),
        **librdkafka_logging(reported_elsewhere=True),
    }
    admin, existing = connect(conf, settings.startup_timeout)
    check_acls(
        admin, conf, read_topics=read, write_topics=written,
        group=settings.group_id if read else None,
        timeout=settings.startup_timeout, existing=existing,
    )  # fmt: skip
    require_topics(cluster, read + written, settings.startup_timeout, existing)
    return admin, existing


def wanted_topics(settings: BridgeSettings) -> list[tuple[str, str]]:
    """``(setting, topic)`` for every topic the bridge needs to exist before it starts."""
    wanted = [("input_topics", t) for t in settings.input_topics]
    wanted += [("output_topic", t) for t in dict.fromkeys(settings.output_topics.values())]
    if settings.on_error == "dlq":
        wanted += [("dlq_topic", settings.dead_letter_topic)]
    return wanted


def _topic_limits(admin: AdminClient, topics: list[str], timeout: float) -> dict[str, int]:
    """``max.message.bytes`` (the broker's limit per record *batch*) of each of ``topics``
    that the principal may describe.

    A produce batch larger than it is refused whole, with every record in it, inside the
    transaction; so the producer's ``batch.size`` must not exceed the smallest (then only a
    record that alone is too large is refused, and app.sink.refusals dead-letters it).
    """
    limits: dict[str, int] = {}
    for topic in topics:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            configs = admin.describe_configs([resource])[resource].result(timeout)
            limits[topic] = int(configs["max.message.bytes"].value)
        except (KafkaException, KeyError, ValueError, TimeoutError) as exc:  # no ACL: skip
            log.info("cannot read max.message.bytes of %s (%s)", topic, describe(exc))
    return limits


def make_state(
    settings: BridgeSettings, pipeline: Pipeline, plan: Regroup | None = None
) -> StateBackend:
    """Per input partition, or per repartition partition when ``plan`` regroups."""
    if not pipeline.stateful:
        return NoState()
    return make_backend(settings, pipeline, None if plan is None else [plan.topic])


def build(
    settings: BridgeSettings,
    metrics: Metrics,
    health: Health,
    watchdog: Watchdog,
    *,
    replaying: bool = False,
    faults: Faults = NO_FAULTS,
) -> Bridge:
    """Construct every collaborator; nothing is consumed until :meth:`Bridge.run`. ``faults``:
    a test rig's (:mod:`app.engine.faults`), never from settings."""
    pipeline = build_pipeline(settings)
    topics, topic_limits, target_admin, keep = preflight(settings, pipeline)
    plan = prepare_repartition(settings, regroup_plan(settings, pipeline), target_admin)
    batch_limit = min(topic_limits.values(), default=None)
    formats, outage = build_formats(settings, health)
    common, consumer = _producer_common(settings), _consumer(settings)
    collector = RecordCollector(metrics=metrics)  # the producer is bound below
    pconf = _producer_config(settings, pipeline, common, batch_limit, collector)
    stuck = stuck_after(settings)
    offsets, tasks = offset_store(settings, pconf, watchdog, target_admin, consumer, stuck, faults)
    txn = Transactions(
        (lambda: tasks.producers) if tasks is not None else (lambda: Producer(pconf)),
        consumer,
        offsets,
        exactly_once=settings.exactly_once,
        call_timeout=settings.call_timeout,
        watchdog=watchdog,
        reset_offset=reset_offset(settings),
        where=f"transaction coordinator of {settings.transactional_id!r}",
        stuck_after=stuck,
    )
    collector.rebind(txn.producer)
    output = Output(
        collector, settings.output_topics, settings.dead_letter_topic, settings.max_output_bytes,
        TopicCatalog(target_admin.list_topics if settings.cross_cluster else consumer.list_topics,
                     topics),
        client_max_bytes=int(pconf.get("message.max.bytes", 1_000_000)),
        dead_letters=DeadLetters(
            metrics, health, settings.max_dead_letter_ratio, settings.dead_letter_ratio_window
        ),
        value_codec=formats.value_out, key_codec=formats.key_out, topic_max_bytes=topic_limits,
        replaying=replaying, keep_partition=keep,
        not_routable=() if settings.cross_cluster else settings.input_topics,
    )  # fmt: skip
    _init_transactions(txn, common, settings.transactional_id)
    state = make_state(settings, pipeline, plan)
    checkpoint = Checkpoint(
        consumer, txn, output, state, metrics,
        interval=settings.commit_interval,
        every=settings.commit_every,
        flush_timeout=settings.transaction_timeout_ms / 1000 / 2,
        max_age=settings.transaction_timeout_ms / 1000 * _TXN_AGE_FRACTION,
        faults=faults,
    )  # fmt: skip
    return assemble(
        consumer, txn, output, pipeline, state, checkpoint, metrics, health, watchdog,
        _loop_settings(settings, replaying, plan), formats, reset_offset(settings), outage, tasks,
        Regrouper(plan, collector) if plan is not None else None,
    )  # fmt: skip


def _producer_common(settings: BridgeSettings) -> dict[str, KafkaValue]:
    """The producer's client settings (target cluster, logging, queue statistics)."""
    return {
        **settings.target_cluster().client_common(),
        **librdkafka_logging(),
        **client_stats("producer"),
    }


def _consumer(settings: BridgeSettings) -> Consumer:
    """The group consumer, on the source cluster."""
    source = settings.source()
    return Consumer(
        consumer_config(
            source.bootstrap_servers, settings.group_id,
            settings.instance_id if settings.static_membership else None,
            {**source.client_common(), **librdkafka_logging(), **client_stats("consumer")},
            dict(settings.consumer),
        )
    )  # fmt: skip


def _loop_settings(settings: BridgeSettings, replaying: bool, plan: Regroup | None) -> LoopSettings:
    hop = [] if plan is None else [plan.topic]  # consumed in the same group
    return LoopSettings(
        topics=settings.input_topics + hop, instance_id=settings.instance_id,
        batch_size=settings.batch_size, poll_timeout=settings.poll_timeout,
        retries=settings.record_retries, dead_letter=settings.on_error == "dlq",
        fused=not replaying, pipelined=settings.pipelined_commit,
        isolate_after=settings.isolation_after_aborts,
    )  # fmt: skip


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
    formats: serde.Formats,
    reset_offset: int = OFFSET_BEGINNING,
    outage: RegistryOutage | None = None,
    tasks: TaskAssignment | None = None,
    regroup: Regrouper | None = None,
) -> Bridge:
    """The engine's own collaborators around built clients: the hooks of the transaction
    owner, the ladder, the repairs and the rebalancer, then the loop (the unit tests' rigs
    assemble fakes the same way)."""
    # An abort drops all uncommitted work: state cache, latched delivery errors, the count.
    for discard in (state.discard, output.reset, checkpoint.abandon):
        txn.on_abort(discard)
    txn.on_new_producer(output.collector.rebind)
    repair = PartitionRepair(consumer, txn.offsets, state, health, metrics, reset_offset)
    isolation = Isolation(loop.isolate_after, loop.batch_size)
    checkpoint.on_commit(isolation.committed)
    checkpoint.on_commit(health.committed)
    ladder = Ladder(txn, output.refusals, metrics, repair, outage, isolation)
    rebalancer = Rebalancer(
        consumer, checkpoint, state, metrics, health, txn.offsets, ladder, tasks
    )  # fmt: skip
    bridge = Bridge(
        consumer, txn, output, pipeline, state, checkpoint, rebalancer, ladder, metrics, health,
        watchdog, loop, formats, tasks.producers if tasks is not None else None, isolation,
        regroup,
    )  # fmt: skip
    if outage is not None:
        outage.stop_when(lambda: bridge.stopping)
    return bridge


def build_formats(
    settings: BridgeSettings, health: Health
) -> tuple[serde.Formats, RegistryOutage | None]:
    """The codec of each topic role; with a registry format (or schema-ID translation), the
    registries are asked now and the output schemas are registered or looked up, so that a
    wrong URL, refused credentials or an incompatible schema (409) stop the bridge before any
    record (exit 2, one line).

    Returns:
        the codecs, and what waits out a registry outage during the run (None: no registry).
    """
    names = [getattr(settings, name) for name in serde.FORMAT_SETTINGS]
    registry, target = settings.schema_registry, settings.target_registry
    translate = (
        target is not None and settings.schema_ids == "translate"
        and settings.output_format == "bytes"
    )  # fmt: skip
    if registry is None or not (set(names) & set(serde.REGISTRY_FORMATS) or translate):
        return serde.formats(*names), None
    # imported here: a JSON pipeline never loads the registry client (issue 57)
    from app.serde.registry_codec import RegistryCodec
    from app.serde.registry_probe import RegistryProbe, RegistryProbes

    client = registry.client()
    probes = [RegistryProbe(registry, client)]
    target_client = None
    if target is not None:
        target_client = target.client()
        probes.append(RegistryProbe(target, target_client, "target_registry"))
    probe = RegistryProbes(*probes)
    probe.check_at_start(time.monotonic() + settings.startup_timeout)
    schemas = {
        Role.INPUT_VALUE: settings.input_schema, Role.INPUT_KEY: settings.input_key_schema,
        Role.OUTPUT_VALUE: settings.output_schema, Role.OUTPUT_KEY: settings.output_key_schema,
    }  # fmt: skip
    formats = serde.formats(
        *names, registry=registry, schemas=schemas, client=client,
        target=target, target_client=target_client, translate=translate,
    )  # fmt: skip
    for codec in (formats.value_out, formats.key_out):
        if isinstance(codec, RegistryCodec):
            for topic in dict.fromkeys(settings.output_topics.values()):
                _prepare(codec, topic)
    return formats, RegistryOutage(probe, health, settings.call_timeout)


def _prepare(codec: RegistryCodec, topic: str) -> None:
    """Register or look up an output schema at start (the registry down now: exit 3)."""
    schema_id = codec.prepare(topic)
    log.info(
        "%s %s: schema ID %d under subject %r in %s", codec.role.value, codec.name,
        schema_id, codec.subject(topic), codec.registry.safe_url,
    )  # fmt: skip


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


def _init_transactions(txn: Transactions, common: dict[str, KafkaValue], txn_id: str) -> None:
    """``init_transactions``, with a missing TransactionalId ACL said as such (exit 2)."""
    try:
        txn.init()
    except KafkaFatalError as exc:
        refused = transactional_access_error(exc, common, txn_id)
        if refused is not None:
            raise refused from None
        raise
