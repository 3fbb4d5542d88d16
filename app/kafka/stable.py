"""High watermark and last stable offset of the partitions the bridge writes: the gap between
them is what an open transaction holds back from ``read_committed`` readers (KIP-664)."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

Partition = tuple[str, int]


def written_partitions(
    admin: AdminClient, topics: Iterable[str], prefix: str, timeout: float
) -> list[Partition]:
    """Every partition of ``topics`` and of the topics named ``prefix...`` (the group's
    changelogs) that exists now."""
    wanted = set(topics)
    metadata = admin.list_topics(timeout=timeout).topics
    return sorted(
        (name, p)
        for name, topic in metadata.items()
        if name in wanted or (prefix and name.startswith(prefix))
        for p in topic.partitions
    )


def stable_offsets(
    admin: AdminClient, partitions: list[Partition], timeout: float
) -> dict[Partition, tuple[int, int]]:
    """``(high watermark, last stable offset)`` per partition: one ListOffsets per isolation
    level (read_uncommitted: the end; read_committed: the LSO). A partition whose answer failed
    is left out (asked again next time)."""
    specs = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
    if not specs:
        return {}
    ends = _latest(admin, specs, IsolationLevel.READ_UNCOMMITTED, timeout)
    stable = _latest(admin, specs, IsolationLevel.READ_COMMITTED, timeout)
    return {tp: (ends[tp], stable[tp]) for tp in ends if tp in stable}


def _latest(
    admin: AdminClient,
    specs: dict[TopicPartition, OffsetSpec],
    isolation: IsolationLevel,
    timeout: float,
) -> dict[Partition, int]:
    futures = admin.list_offsets(specs, isolation_level=isolation, request_timeout=timeout)
    found: dict[Partition, int] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = int(future.result(timeout).offset)
        except Exception:  # one partition's failure must not hide the others
            continue
    return found
