"""The start-up checks that talk to the clusters and registries, before anything is built.

Each cluster answers (TLS and credentials included), the topics exist, the principal may read
the inputs and the group and write the outputs, the topics' limits and partition counts, the
registries answer and the output schemas are registered, and the topics the bridge owns
(repartition, offsets, changelogs) exist. :func:`check` does that I/O and returns what it
learnt as one :class:`Preflight` record; :mod:`app.engine.wiring` builds from it and the
settings without a network call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from app import serde
from app.config import BridgeSettings, Cluster
from app.engine.repartition import prepare_repartition, regroup_plan
from app.errors import ConfigError
from app.kafka.access import check_acls, connect
from app.kafka.admin import (
    group_session_timeout_ms,
    partition_counts,
    refuse_compacted_dlq,
    require_topics,
)
from app.kafka.errors import describe
from app.kafka.naming import keeps_partition, partition_mismatches
from app.offsets.target import prepare_offsets_topic
from app.ops.logs import librdkafka_logging
from app.pipeline.builder import Pipeline
from app.pipeline.split import Regroup
from app.serde import Role
from app.state.errors import changelog_errors
from app.state.factory import pipeline_stores
from changelog.naming import changelog_topic_name
from changelog.topics import ChangelogSpec, ensure_changelog_topics

if TYPE_CHECKING:
    from app.serde.registry_codec import RegistryCodec
    from app.serde.registry_probe import RegistryProbes

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Changelogs:
    """The changelog topics of a stateful pipeline, created or checked at start."""

    names: Mapping[tuple[str, str], str]  # (store, topic whose partitions hold state) → topic
    admin: Any  # the target's admin client that checked them; the run asks it for watermarks


@dataclass(slots=True, frozen=True)
class Preflight:
    """What the start-up checks learnt, for the composition to build from.

    Attributes:
        topics: every topic name of the target.
        topic_limits: ``max.message.bytes`` of each topic the bridge writes (those it may read).
        keep_partition: records keep their input partition.
        target_admin: the target's admin client (the run's topic lookups on two clusters).
        plan: a regrouped pipeline's cut, its repartition topic created or checked.
        formats: the codec of each topic role, output schemas registered.
        registry: the registries' probes (None: no registry), for outages during the run.
        changelogs: a stateful pipeline's changelog topics (None: no state).
        group_session_ms: ``group_protocol: consumer``: the group's session timeout as the
            broker holds it (None: classic, or the broker did not say).
    """

    topics: frozenset[str]
    topic_limits: Mapping[str, int]
    keep_partition: bool
    target_admin: Any
    plan: Regroup | None = None
    formats: serde.Formats = field(default_factory=serde.formats)
    registry: RegistryProbes | None = None
    changelogs: Changelogs | None = None
    group_session_ms: int | None = None


def check(settings: BridgeSettings, pipeline: Pipeline) -> Preflight:
    """Every start-up check, in the order the bridge has always made them.

    Raises:
        ConfigError: the user's setting, topic, credential, ACL or schema (exit 2, one line).
    """
    topics, limits, admin, keep = clusters(settings, pipeline)
    plan = prepare_repartition(settings, regroup_plan(settings, pipeline), admin)
    formats, registry = registries(settings)
    if settings.cross_cluster and settings.exactly_once:
        prepare_offsets_topic(admin, offsets_topic(settings), settings.startup_timeout)
    changelogs = None
    if pipeline.stateful:
        changelogs = prepare_changelogs(settings, pipeline, None if plan is None else [plan.topic])
    session = None
    if settings.group_protocol == "consumer":
        source = _source_admin(settings) if settings.cross_cluster else admin
        session = group_session_timeout_ms(source, settings.group_id, settings.startup_timeout)
    facts = (frozenset(topics), limits, keep, admin, plan, formats, registry, changelogs)
    return Preflight(*facts, group_session_ms=session)


def check_only(settings: BridgeSettings, pipeline: Pipeline) -> None:
    """The checks of :func:`check` in its order, for ``check-config``, so that it refuses what
    ``run`` refuses with the same line: the clusters (TLS, credentials, ACLs, each topic on the
    cluster of its role: inputs on the source, outputs and the dead-letter topic on the
    target), the registries (reachable, credentials, schema files, the output schemas
    registered or looked up under their subjects, as ``run`` does) and a two-cluster offsets
    topic's policy. It creates no topic: a repartition, offsets or changelog topic that is
    missing is ``run``'s to create.

    Raises:
        ConfigError: as :func:`check`; RegistryUnavailable, KafkaException, TimeoutError too.
    """
    _, _, admin, _ = clusters(settings, pipeline)
    registries(settings)  # a one-shot command: its registry clients end with the process
    if settings.cross_cluster and settings.exactly_once:
        prepare_offsets_topic(
            admin, offsets_topic(settings), settings.startup_timeout, create=False
        )


def offsets_topic(settings: BridgeSettings) -> str:
    """Two clusters: the target's topic of committed input positions."""
    return settings.offsets_topic or f"{settings.group_id}.offsets"


def clusters(
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
        outputs,
        partition_counts(source, outputs, timeout),
        partition_counts(target, outputs.values(), timeout),
    )
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
        admin,
        conf,
        read_topics=read,
        write_topics=written,
        group=settings.group_id if read else None,
        timeout=settings.startup_timeout,
        existing=existing,
    )
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


def registries(settings: BridgeSettings) -> tuple[serde.Formats, RegistryProbes | None]:
    """The codec of each topic role; with a registry format (or schema-ID translation), the
    registries are asked now and the output schemas are registered or looked up, so that a
    wrong URL, refused credentials or an incompatible schema (409) stop the bridge before any
    record (exit 2, one line).

    Returns:
        the codecs, and the registries' probes (None: no registry).
    """
    names = [getattr(settings, name) for name in serde.FORMAT_SETTINGS]
    registry, target = settings.schema_registry, settings.target_registry
    translate = (
        target is not None
        and settings.schema_ids == "translate"
        and settings.output_format == "bytes"
    )
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
        Role.INPUT_VALUE: settings.input_schema,
        Role.INPUT_KEY: settings.input_key_schema,
        Role.OUTPUT_VALUE: settings.output_schema,
        Role.OUTPUT_KEY: settings.output_key_schema,
    }
    formats = serde.formats(
        *names,
        registry=registry,
        schemas=schemas,
        client=client,
        target=target,
        target_client=target_client,
        translate=translate,
    )
    for codec in (formats.value_out, formats.key_out):
        if isinstance(codec, RegistryCodec):
            for topic in dict.fromkeys(settings.output_topics.values()):
                _prepare(codec, topic)
    return formats, probe


def _prepare(codec: RegistryCodec, topic: str) -> None:
    """Register or look up an output schema at start (the registry down now: exit 3)."""
    schema_id = codec.prepare(topic)
    log.info(
        "%s %s: schema ID %d under subject %r in %s",
        codec.role.value,
        codec.name,
        schema_id,
        codec.subject(topic),
        codec.registry.safe_url,
    )


def state_client(settings: BridgeSettings) -> dict[str, Any]:
    """The client settings of the changelogs' cluster (where the outputs are written)."""
    target = settings.target_cluster()
    return {
        "bootstrap.servers": target.bootstrap_servers,
        **target.client_common(),
        **librdkafka_logging(),
    }


def prepare_changelogs(
    settings: BridgeSettings, pipeline: Pipeline, topics: list[str] | None = None
) -> Changelogs | None:
    """Create (or check) a changelog topic per (store, topic) with the topic's partition
    count; ``topics``: those whose partitions hold state (default the input topics; a
    regrouped pipeline's: its repartition topic). None: the pipeline keeps no state.

    Raises:
        ConfigError: bad store names, a missing input topic or unusable changelog topics.
    """
    stores = pipeline_stores(pipeline)
    if not stores:
        return None
    admin = AdminClient(state_client(settings))
    inputs = _source_admin(settings) if settings.cross_cluster else admin
    names, specs = {}, []
    for topic in settings.input_topics if topics is None else topics:
        partitions = _partition_count(inputs, topic, settings.startup_timeout)
        for store in stores:
            with changelog_errors():
                name = changelog_topic_name(settings.group_id, topic, store)
            names[(store, topic)] = name
            specs.append(ChangelogSpec(name, partitions))
    with changelog_errors():
        ensure_changelog_topics(admin, specs, timeout=settings.startup_timeout)
    return Changelogs(names, admin)


def _source_admin(settings: BridgeSettings) -> AdminClient:
    """An admin client of the source cluster: the inputs' partition counts are read there."""
    source = settings.source()
    return AdminClient(
        {
            "bootstrap.servers": source.bootstrap_servers,
            **source.client_common(),
            **librdkafka_logging(),
        }
    )


def _partition_count(admin: Any, topic: str, timeout: float) -> int:
    meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None:
        raise ConfigError(
            f"input_topics: topic {topic!r} does not exist; its changelog needs its partition count"
        )
    return len(meta.partitions)
