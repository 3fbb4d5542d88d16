"""What the tools that read a bridge's committed positions share across two clusters
(``lag``, ``verify``): the target's settings and flags, and where the positions are.

Between two clusters (``target.bootstrap_servers``, docs/cross-cluster.md) an exactly-once
bridge commits its positions to its offsets topic on the target, not to the source group: they
are read from there (read_committed, to the end). The input is on the source; the output, the
dead letters and the offsets topic are on the target.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient
from pydantic import Field

from app.config import Cluster, ConnectionSettings, load_tool_settings
from app.errors import ConfigError
from app.kafka.errors import RETRY_PAUSE_S, describe, settling
from app.kafka.topics import partitions_of, read_all
from app.offsets.target import latest_positions

Positions = dict[tuple[str, int], int]


class TwoClusterSettings(ConnectionSettings):
    """The connection settings, and for two clusters the target and its offsets topic (the
    same names as the bridge's)."""

    target: Cluster | None = Field(
        None, description="two clusters: the cluster written to, holding offsets_topic"
    )
    offsets_topic: str | None = Field(
        None,
        description="two clusters: the positions' topic on the target; default <GROUP>.offsets",
    )

    @property
    def cross_cluster(self) -> bool:
        return self.target is not None and self.target.bootstrap_servers != self.bootstrap_servers

    def target_cluster(self) -> Cluster:
        """The cluster written to: ``target``, or the one read from (as the bridge's)."""
        return self.target or self.source()


def add_target_args(parser: argparse.ArgumentParser) -> None:
    """``--target`` and ``--offsets-topic`` (over ``BRIDGE_TARGET__BOOTSTRAP_SERVERS`` and
    ``BRIDGE_OFFSETS_TOPIC``)."""
    parser.add_argument(
        "--target",
        metavar="HOST:PORT",
        help="two clusters: the target's bootstrap (overrides BRIDGE_TARGET__BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--offsets-topic", help="two clusters: overrides BRIDGE_OFFSETS_TOPIC (<GROUP>.offsets)"
    )


def two_cluster_settings(args: argparse.Namespace) -> TwoClusterSettings:
    """The settings with ``--bootstrap``, ``--target`` and ``--offsets-topic`` over the
    environment and the file."""
    overrides: dict[str, object] = {"bootstrap_servers": args.bootstrap} if args.bootstrap else {}
    if args.target:
        overrides["target"] = {"bootstrap_servers": args.target}
    if args.offsets_topic:
        overrides["offsets_topic"] = args.offsets_topic
    return load_tool_settings(TwoClusterSettings, args.config, **overrides)


def committed_positions(
    conn: TwoClusterSettings, group: str, timeout: float
) -> tuple[Positions, str]:
    """The group's positions and where they were read: two clusters, from the target's
    offsets topic when it holds any of the group (exactly-once), else from the source group
    (at-least-once, or one cluster)."""
    if conn.target is not None and conn.cross_cluster:
        topic = conn.offsets_topic or f"{group}.offsets"
        target = conn.target.client_config()
        where = f"in the offsets topic {topic!r} on {conn.target.bootstrap_servers}"
        positions = _offsets_topic_positions(target, topic, group, timeout)
        if positions:
            return positions, where
        positions = _group_positions(conn, group, timeout)
        source = f"in the source group on {conn.bootstrap_servers}"
        return positions, (source if positions else f"{where} nor {source}")
    return _group_positions(conn, group, timeout), f"on {conn.bootstrap_servers}"


def _offsets_topic_positions(
    target: Mapping[str, object], topic: str, group: str, timeout: float
) -> Positions:
    try:
        partitions_of(target, topic, timeout)
    except KeyError:
        return {}
    records = read_all(target, topic, read_committed=True, timeout=timeout)
    return latest_positions(group, ((r.key, r.value) for r in records))


def _group_positions(conn: ConnectionSettings, group: str, timeout: float) -> Positions:
    """The group's committed offsets; a coordinator still loading or moving is asked again
    until ``timeout`` (as the bridge's own offset look-ups do)."""
    admin = AdminClient(conn.client_config())
    request = [ConsumerGroupTopicPartitions(group)]
    deadline = time.monotonic() + timeout
    while True:
        try:
            left = max(1.0, deadline - time.monotonic())
            answer = admin.list_consumer_group_offsets(request)[group].result(left)
            return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}
        except (KafkaException, TimeoutError) as exc:  # TimeoutError: no answer in time
            if not settling(exc) or time.monotonic() >= deadline:
                raise ConfigError(
                    f"cannot read the offsets of group {group!r}: {describe(exc)}"
                ) from None
        time.sleep(RETRY_PAUSE_S[0])
