"""The repartition topics of regrouped pipelines (app.pipeline.split): created at start.

Not compacted: every record is read once by the tail, then only retention removes it. The
retention (:data:`REPARTITION_RETENTION_MS`, 7 days) bounds how long a group may stop before
records written but not yet read are lost; docs/state.md says so.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from app.errors import ConfigError

log = logging.getLogger(__name__)

REPARTITION_RETENTION_MS = 7 * 24 * 3600 * 1000
REPARTITION_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": str(REPARTITION_RETENTION_MS),
}


def partition_count(admin: Any, topic: str, timeout: float) -> int | None:
    """Partitions of ``topic``, None when it does not exist."""
    meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return None
    return len(meta.partitions)


def ensure_repartition_topic(admin: Any, name: str, partitions: int, timeout: float) -> None:
    """Create ``name`` with ``partitions`` partitions, or check the one that exists.

    Raises:
        ConfigError: it cannot be created, or it exists with another partition count.
    """
    existing = partition_count(admin, name, timeout)
    if existing is None:
        new = NewTopic(name, partitions, -1, config=dict(REPARTITION_TOPIC_CONFIG))
        try:
            admin.create_topics([new], operation_timeout=timeout)[name].result(timeout)
            log.info("created repartition topic %s (%d partitions)", name, partitions)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise ConfigError(
                    f"cannot create repartition topic {name!r} ({partitions} partitions): "
                    f"{exc}. Create it yourself or grant CreateTopics."
                ) from None
        existing = _wait_for_partitions(admin, name, timeout)
    if existing != partitions:
        raise ConfigError(
            f"repartition topic {name!r} has {existing} partitions, not {partitions} (the input "
            f"topics' largest count): delete it while the group is stopped and caught up"
        )


def _wait_for_partitions(admin: Any, name: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(name, timeout=timeout).topics.get(name)
        ready = topic is not None and topic.error is None and topic.partitions
        if ready and all(p.leader >= 0 for p in topic.partitions.values()):
            return len(topic.partitions)
        if time.monotonic() > deadline:
            raise ConfigError(f"repartition topic {name!r} has no leader after {timeout:.0f}s")
        time.sleep(0.1)
