"""Where the input positions live: the source group (one cluster, KIP-447) or the target's
offsets topic with one transactional producer per input partition (two clusters,
docs/cross-cluster.md) — the composition's one choice of :class:`OffsetStore`."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

from app.config import BridgeSettings
from app.engine.faults import NO_FAULTS, Faults
from app.engine.preflight import offsets_topic
from app.engine.tasks import TaskAssignment, TaskProducers, task_id_prefix, task_transactional_id
from app.engine.transactions import renews_epochs
from app.engine.watchdog import Watchdog
from app.kafka.clients import KAFKA, Clients
from app.kafka.defaults import retried_after, stuck_call_deadline
from app.kafka.ports import ConsumerPort
from app.offsets import GroupOffsets, OffsetStore, TargetOffsets
from app.ops.logs import librdkafka_logging

log = logging.getLogger(__name__)


def stuck_after(settings: BridgeSettings, group_session_ms: int | None = None) -> float:
    """The watchdog's deadline for one blocking call (``stuck_call_timeout`` or derived;
    ``group_session_ms``: a KIP-848 group's session timeout, from the broker)."""
    timeouts = (settings.kafka, settings.consumer, settings.producer)
    return settings.stuck_call_timeout or stuck_call_deadline(
        settings.call_timeout, *timeouts, group_session_ms
    )


def offset_store(
    settings: BridgeSettings,
    pconf: dict[str, Any],
    watchdog: Watchdog,
    consumer: ConsumerPort,
    stuck: float,
    faults: Faults = NO_FAULTS,
    clients: Clients = KAFKA,
) -> tuple[OffsetStore, TaskAssignment | None]:
    """The store of input positions, and the task producers when there are several."""
    if settings.cross_cluster and settings.exactly_once:
        tasks = cross_cluster_tasks(settings, pconf, watchdog, consumer, stuck, faults, clients)
        return tasks.offsets, tasks
    return GroupOffsets(consumer, watchdog, settings.call_timeout, stuck), None


def cross_cluster_tasks(
    settings: BridgeSettings,
    pconf: dict[str, Any],
    watchdog: Watchdog,
    consumer: ConsumerPort,
    stuck: float,
    faults: Faults = NO_FAULTS,
    clients: Clients = KAFKA,
) -> TaskAssignment:
    """Two clusters, exactly-once: one transactional producer per input partition and the
    positions in the target's offsets topic (docs/cross-cluster.md); ``stuck`` bounds each
    of their blocking calls (:func:`stuck_after`); ``faults.task_id``, a test's, replaces
    the per-partition transactional ids. The offsets topic was prepared at start
    (:mod:`app.engine.preflight`)."""
    topic = offsets_topic(settings)
    group = settings.group_id
    prefix = task_id_prefix(settings.transactional_id_prefix, group)
    producers = TaskProducers(
        lambda txn_id: clients.producer({**pconf, "transactional.id": txn_id}),
        faults.task_id or (lambda n: task_transactional_id(prefix, n)),
        watchdog,
        settings.call_timeout,
        stuck,
        new_epoch_per_abort=renews_epochs(faults.same_epoch_after_abort),
        retried_after=retried_after(pconf),
    )
    target = settings.target_cluster()
    reader = {
        "bootstrap.servers": target.bootstrap_servers,
        **target.client_common(),
        **librdkafka_logging(),
    }
    offsets = TargetOffsets(
        reader,
        topic,
        group,
        settings.transactional_id,
        watchdog,
        settings.call_timeout,
        mirror=consumer if settings.mirror_offsets_to_source else None,
        stuck_after=stuck,
        new_reader=clients.consumer,
    )
    return TaskAssignment(producers, offsets, reset_offset(settings))


def reset_offset(settings: BridgeSettings) -> int:
    """Where a partition without a committed position starts (``auto.offset.reset``)."""
    return OFFSET_END if _starts_from_end(settings) else OFFSET_BEGINNING


def _starts_from_end(settings: BridgeSettings) -> bool:
    return str(settings.consumer.get("auto.offset.reset", "earliest")) == "latest"
