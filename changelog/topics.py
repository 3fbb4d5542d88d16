"""Create the changelog topics, or check the ones that exist.

A changelog has as many partitions as its input topic (changelog partition p holds the state of
input partition p) and ``cleanup.policy=compact`` (only the latest value per key matters). An
existing topic that breaks either rule is refused with a message naming it: silently using it
would restore the wrong state or lose it to retention.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic, OffsetSpec

from changelog.errors import ChangelogConfigError, ChangelogReadError, ErrorTest, inner_error

log = logging.getLogger(__name__)
# One ListOffsets round asks with at most this share of the watermarks' timeout (see
# changelog_watermarks).
ROUND_TIMEOUT_SHARE = 1 / 6

CHANGELOG_TOPIC_CONFIG: dict[str, str] = {"cleanup.policy": "compact"}


@dataclass(slots=True, frozen=True)
class ChangelogSpec:
    """One changelog topic the bridge needs."""

    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=lambda: dict(CHANGELOG_TOPIC_CONFIG))


def ensure_changelog_topics(
    admin: Any, specs: list[ChangelogSpec], replication: int = -1, timeout: float = 30.0
) -> None:
    """Create missing changelog topics (compacted) and check existing ones.

    Args:
        admin: a ``confluent_kafka.admin.AdminClient``.
        specs: the topics to ensure.
        replication: replication factor of new topics (-1 = the broker's
            ``default.replication.factor``).
        timeout: seconds for each admin request.

    Raises:
        ChangelogConfigError: a topic exists with the wrong partition count or is not
            compacted, or it cannot be created.
    """
    if not specs:
        return
    existing = admin.list_topics(timeout=timeout).topics
    missing = [s for s in specs if s.name not in existing]
    if missing:
        _create(admin, missing, replication, timeout)
        _wait_for_leaders(admin, [s.name for s in missing], timeout)
    # Created a moment ago by another instance starting beside us: its metadata may still show
    # no partitions (or no leader); judged then, it would look like a partition-count mismatch.
    settling = [s.name for s in specs if s.name in existing and _settling(existing[s.name])]
    if settling:
        _wait_for_leaders(admin, settling, timeout)
        existing = admin.list_topics(timeout=timeout).topics
    for spec in specs:
        if spec.name in existing:
            _check(admin, spec, len(existing[spec.name].partitions), timeout)


def _create(admin: Any, specs: list[ChangelogSpec], replication: int, timeout: float) -> None:
    new = [NewTopic(s.name, s.partitions, replication, config=dict(s.config)) for s in specs]
    futures = admin.create_topics(new, operation_timeout=timeout)
    for spec in specs:
        try:
            futures[spec.name].result(timeout)
            log.info("created changelog topic %s (%d partitions)", spec.name, spec.partitions)
        except KafkaException as exc:
            err = inner_error(exc)
            if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                # another instance was quicker (and its topic may not be settled yet)
                _wait_for_leaders(admin, [spec.name], timeout)
                _check(admin, spec, _partition_count(admin, spec.name, timeout), timeout)
                continue
            raise ChangelogConfigError(
                f"cannot create changelog topic {spec.name!r} ({spec.partitions} partitions, "
                f"cleanup.policy=compact): {exc}. Create it yourself or grant CreateTopics."
            ) from None


def _wait_for_leaders(admin: Any, names: list[str], timeout: float) -> None:
    """New topics are usable once metadata shows a leader for every partition."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting:
        topics = admin.list_topics(timeout=timeout).topics
        waiting = [n for n in waiting if n not in topics or _settling(topics[n])]
        if waiting and time.monotonic() > deadline:
            raise ChangelogConfigError(
                f"changelog topics {waiting} have no leader after {timeout:.0f}s"
            )
        if waiting:
            time.sleep(0.1)


def _settling(topic: Any) -> bool:
    """Metadata of a topic still being created: an error, no partitions or a partition
    without a leader."""
    partitions = topic.partitions.values()
    return topic.error is not None or not partitions or any(p.leader < 0 for p in partitions)


def _partition_count(admin: Any, name: str, timeout: float) -> int:
    return len(admin.list_topics(name, timeout=timeout).topics[name].partitions)


def _check(admin: Any, spec: ChangelogSpec, partitions: int, timeout: float) -> None:
    if partitions != spec.partitions:
        raise ChangelogConfigError(
            f"changelog topic {spec.name!r} has {partitions} partitions but its input topic has "
            f"{spec.partitions}: changelog partition p must hold the state of input partition p. "
            f"Delete the changelog topic (state is rebuilt from the input) or restore the input "
            f"topic's partition count."
        )
    resource = ConfigResource(ConfigResource.Type.TOPIC, spec.name)
    configs = admin.describe_configs([resource])[resource].result(timeout)
    policy = configs["cleanup.policy"].value if "cleanup.policy" in configs else "delete"
    if "compact" not in str(policy).split(","):
        raise ChangelogConfigError(
            f"changelog topic {spec.name!r} has cleanup.policy={policy}, not compact: retention "
            f"would delete state. Set cleanup.policy=compact on it (kafka-configs --alter)."
        )
    if "delete" in str(policy).split(","):
        log.warning(
            "changelog topic %s has cleanup.policy=%s: retention may drop state", spec.name, policy
        )


def changelog_watermarks(
    admin: Any,
    partitions: list[tuple[str, int]],
    timeout: float = 30.0,
    *,
    settling: ErrorTest,
    renew: Callable[[], Any] | None = None,
) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark per changelog partition, in two requests for all of them.

    The high watermark is read *uncommitted*: recovery must reach it, not the last stable
    offset, or committed records behind another producer's open transaction would be missed.

    Args:
        admin: a ``confluent_kafka.admin.AdminClient``.
        partitions: the changelog partitions.
        timeout: seconds for all of it.
        settling: True for an error worth asking again (leadership moving, retriable).
        renew: a new admin client, asked for once when settling errors last a quarter of the
            timeout: librdkafka's admin ListOffsets sends the cached leader epoch and refreshes
            its cache only on NOT_LEADER/LEADER_NOT_AVAILABLE, so a FENCED_LEADER_EPOCH can
            outlast the retries (the 2-hour soak met it for 30 s after a rolling broker
            restart), and its leader lookup can keep answering LEADER_NOT_AVAILABLE from a
            client's metadata after the partition has a new leader (the soak again: 30 s after
            a group coordinator's broker was killed, its partitions led elsewhere within a
            second); a new client starts from fresh metadata.

    Each round asks with at most :data:`ROUND_TIMEOUT_SHARE` of the timeout: librdkafka holds
    a ListOffsets whose leader it cannot find for the whole request timeout, and one round
    that used all of it would leave no time to ask a new client.

    Raises:
        ChangelogReadError: the offsets cannot be listed (the message names the partition).
    """
    result: dict[tuple[str, int], list[int]] = {tp: [0, 0] for tp in partitions}
    deadline = time.monotonic() + timeout
    renew_at = deadline - timeout * 3 / 4 if renew is not None else math.inf
    round_s = max(1.0, timeout * ROUND_TIMEOUT_SHARE)
    for slot, spec in ((0, OffsetSpec.earliest()), (1, OffsetSpec.latest())):
        todo = list(partitions)
        while todo:
            todo = _list_offsets(admin, todo, spec, slot, result, deadline, round_s, settling)
            if todo and renew is not None and time.monotonic() >= renew_at:
                log.warning("changelog offsets of %s still refused: asking a new client", todo)
                admin, renew_at = renew(), math.inf
    return {tp: (low, high) for tp, (low, high) in result.items()}


def _list_offsets(
    admin: Any,
    partitions: list[tuple[str, int]],
    spec: Any,
    slot: int,
    result: dict[tuple[str, int], list[int]],
    deadline: float,
    round_s: float,
    settling: ErrorTest,
) -> list[tuple[str, int]]:
    """One ListOffsets round of at most ``round_s``; returns the partitions to ask again
    (leader moving, retriable)."""
    request = {TopicPartition(t, p): spec for t, p in partitions}
    futures = admin.list_offsets(
        request,
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        request_timeout=max(0.1, min(round_s, deadline - time.monotonic())),
    )
    again: list[tuple[str, int]] = []
    for tp, future in futures.items():
        try:
            offset = int(future.result().offset)
        except KafkaException as exc:
            err = inner_error(exc)
            if err is not None and settling(err) and time.monotonic() < deadline:
                again.append((tp.topic, tp.partition))
                continue
            raise ChangelogReadError(
                f"cannot list offsets of changelog {tp.topic}[{tp.partition}]: {exc}"
            ) from None
        if offset < 0:
            # No error, yet no offset (-1001 seen from librdkafka 2.16 in the soak, while the
            # partition's broker was cut off): taken as an end offset it made recovery wipe a
            # good store and restore nothing. Asked again; past the deadline an error.
            if time.monotonic() < deadline:
                again.append((tp.topic, tp.partition))
                continue
            raise ChangelogReadError(
                f"cannot list offsets of changelog {tp.topic}[{tp.partition}]: the broker "
                f"answered offset {offset} (none) until the deadline"
            )
        result[(tp.topic, tp.partition)][slot] = offset
    if again:
        _refresh_metadata(admin, {topic for topic, _ in again}, deadline)
        time.sleep(0.2)
    return again


def _refresh_metadata(admin: Any, topics: set[str], deadline: float) -> None:
    """Ask for the topics' metadata again before a retry, as the Java client does on these
    errors (KAFKA-9535). Best effort only: librdkafka's admin ListOffsets sends its cached leader
    epoch, and in the 2-hour soak (docs/chaos.md, attempt 5) a FENCED_LEADER_EPOCH still lasted
    the whole 30 s after a broker restart; branch ``fenced`` asks a new admin client instead."""
    for topic in sorted(topics):
        try:
            admin.list_topics(topic, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
        except KafkaException:
            return  # the retry meets the same error and the deadline bounds it
