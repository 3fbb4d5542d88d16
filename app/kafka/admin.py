"""Start-up checks every command shares: the broker answers, the named topics exist.

Both raise :class:`ConfigError` with one line naming the setting (or option) and the topic,
so the bridge, ``check-config --check-topics``, ``verify`` and the tools report them alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import SequenceMatcher

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, ResourceType

from app.errors import ConfigError
from app.kafka.errors import describe
from app.kafka.ports import Connection


def cluster_metadata(conn: Connection, timeout: float) -> ClusterMetadata:
    """Metadata of every topic, or :class:`ConfigError` when the broker cannot be reached."""
    admin = AdminClient(conn.client_config())
    try:
        return admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ConfigError(
            f"cannot reach Kafka at bootstrap_servers={conn.bootstrap_servers!r} "
            f"(BRIDGE_BOOTSTRAP_SERVERS) within {timeout:.0f}s: {describe(exc)}. "
            f"Check the address, the network and the credentials."
        ) from None


def require_topics(
    conn: Connection,
    wanted: Iterable[tuple[str, str]],
    timeout: float,
    existing: set[str] | None = None,
) -> set[str]:
    """Check that every ``(setting, topic)`` exists (one line per missing topic); returns every
    topic name there is.

    ``setting`` names where the topic came from (a setting or an option; empty for a tool's
    only topic argument), so the message says what to correct. ``existing``: the topic names
    when the caller has just listed them.
    """
    if existing is None:
        existing = set(cluster_metadata(conn, timeout).topics)
    missing = []
    for setting, topic in wanted:
        if topic not in existing:
            close = [t for t in sorted(existing) if _similar(t, topic)][:1]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = f"{setting}: " if setting else ""
            missing.append(
                f"{where}topic {topic!r} does not exist on {conn.bootstrap_servers}{hint}; "
                f"create it first (eos-bridge topics create; the bridge never auto-creates topics)"
            )
    if missing:
        raise ConfigError("\n".join(missing))
    return existing


def partition_counts(admin: AdminClient, topics: Iterable[str], timeout: float) -> dict[str, int]:
    """The partition count of each of ``topics`` (those the metadata names)."""
    try:
        meta = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise ConfigError(f"cannot read topic metadata: {describe(exc)}") from None
    return {t: len(meta[t].partitions) for t in topics if t in meta}


def _similar(a: str, b: str) -> bool:
    return SequenceMatcher(None, a, b).ratio() >= 0.8


def refuse_compacted_dlq(admin: AdminClient, topic: str, timeout: float) -> None:
    """The dead-letter topic must not be compacted: a compacted topic refuses a record without
    a key (``INVALID_RECORD``), and most dead letters have none; every transaction holding one
    would abort. Unreadable configs (no DescribeConfigs ACL) are let through.

    Raises:
        ConfigError: its ``cleanup.policy`` contains ``compact``.
    """
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout)
        policy = str(configs["cleanup.policy"].value or "")
    except (KafkaException, KeyError, TimeoutError):
        return
    if "compact" in policy.split(","):
        raise ConfigError(
            f"dlq_topic (BRIDGE_DLQ_TOPIC): topic {topic!r} has cleanup.policy={policy}; a "
            f"compacted topic refuses dead letters without a key: use a topic with "
            f"cleanup.policy=delete"
        )


def group_session_timeout_ms(admin: AdminClient, group: str, timeout: float) -> int | None:
    """Under KIP-848 the broker holds a group's session timeout: the group's
    ``consumer.session.timeout.ms`` (its own config, else the broker's
    ``group.consumer.session.timeout.ms``). None when the broker does not say (no
    DescribeConfigs right on the group, or a broker without group configs): the caller then
    takes the documented default."""
    resource = ConfigResource(ResourceType.GROUP, group)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource]
        entry = entries.result(timeout=timeout).get("consumer.session.timeout.ms")
    except KafkaException:
        return None
    return None if entry is None or entry.value is None else int(entry.value)
