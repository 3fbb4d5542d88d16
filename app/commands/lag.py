"""``eos-bridge lag GROUP``: a consumer group's committed positions against the end offsets.

For the bridge, the committed positions are those committed inside its transactions, so the
lag is what is left to process after the last checkpoint. Between two clusters
(``target.bootstrap_servers``, docs/cross-cluster.md) an exactly-once bridge commits them to
its offsets topic on the target, not to the source group: the positions are read from there
(read_committed, to the end) and the end offsets from the source cluster, where the input is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient
from pydantic import Field

from app.commands.connect import EXIT_OK, Subparsers, tool_parser
from app.config import Cluster, ConnectionSettings, load_tool_settings
from app.errors import ConfigError
from app.kafka.errors import describe
from app.kafka.topics import end_offsets, partitions_of, read_all
from app.offsets.target import latest_positions

Positions = dict[tuple[str, int], int]


class LagSettings(ConnectionSettings):
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


@dataclass(slots=True, frozen=True)
class PartitionLag:
    """One partition's committed offset, end offset (high watermark) and the difference."""

    topic: str
    partition: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


def add_parser(sub: Subparsers) -> None:
    """Register ``lag``."""
    parser = tool_parser(
        sub, "lag", "committed offsets vs end offsets of a consumer group", model=LagSettings
    )
    parser.add_argument("group", help="consumer group (the bridge's BRIDGE_GROUP_ID)")
    parser.add_argument("--topic", action="append", help="only these topics (repeat)")
    parser.add_argument(
        "--target", metavar="HOST:PORT",
        help="two clusters: the target's bootstrap (overrides BRIDGE_TARGET__BOOTSTRAP_SERVERS)",
    )  # fmt: skip
    parser.add_argument(
        "--offsets-topic", help="two clusters: overrides BRIDGE_OFFSETS_TOPIC (<GROUP>.offsets)"
    )
    parser.set_defaults(func=run)


def lag_settings(args: argparse.Namespace) -> LagSettings:
    """The settings with ``--bootstrap``, ``--target`` and ``--offsets-topic`` over the
    environment and the file."""
    overrides: dict[str, object] = {"bootstrap_servers": args.bootstrap} if args.bootstrap else {}
    if args.target:
        overrides["target"] = {"bootstrap_servers": args.target}
    if args.offsets_topic:
        overrides["offsets_topic"] = args.offsets_topic
    return load_tool_settings(LagSettings, args.config, **overrides)


def group_lag(
    conn: LagSettings, group: str, topics: list[str] | None, timeout: float
) -> tuple[list[PartitionLag], str]:
    """Lag of every partition ``group`` has committed positions for (optionally of
    ``topics``), and where the positions were read."""
    committed, where = committed_positions(conn, group, timeout)
    committed = {tp: o for tp, o in committed.items() if o >= 0 and (not topics or tp[0] in topics)}
    if not committed:
        raise ConfigError(
            f"group {group!r} has no committed offsets {where}"
            + (f" for topics {topics}" if topics else "")
            + " (check the name: the bridge's group is BRIDGE_GROUP_ID, default eos-bridge)"
        )
    ends: dict[str, dict[int, int]] = {}
    for topic in sorted({t for t, _ in committed}):  # the input's ends: the source cluster
        ends[topic] = end_offsets(conn.client_config(), topic, read_committed=False)
    rows = [
        PartitionLag(topic, partition, offset, ends[topic].get(partition, offset))
        for (topic, partition), offset in sorted(committed.items())
    ]
    return rows, where


def committed_positions(conn: LagSettings, group: str, timeout: float) -> tuple[Positions, str]:
    """The group's positions: two clusters, from the target's offsets topic when it holds any
    of the group (exactly-once), else from the source group (at-least-once, or one cluster)."""
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
    admin = AdminClient(conn.client_config())
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        answer = admin.list_consumer_group_offsets(request)[group].result(timeout)
    except KafkaException as exc:
        raise ConfigError(f"cannot read the offsets of group {group!r}: {describe(exc)}") from None
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}


def format_table(rows: list[PartitionLag]) -> str:
    """A plain table with a total line."""
    width = max(len("TOPIC"), *(len(r.topic) for r in rows))
    lines = [f"{'TOPIC':<{width}}  PARTITION  COMMITTED        END        LAG"]
    lines += [
        f"{r.topic:<{width}}  {r.partition:>9}  {r.committed:>9}  {r.end:>9}  {r.lag:>9}"
        for r in rows
    ]
    lines.append(f"total lag: {sum(r.lag for r in rows)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the group's lag per partition and in total; between two clusters, also where
    the positions were read (on stderr: the table stays the same)."""
    settings = lag_settings(args)
    rows, where = group_lag(settings, args.group, args.topic, args.timeout)
    if settings.cross_cluster:
        print(f"positions {where}; end offsets on {settings.bootstrap_servers}", file=sys.stderr)
    print(format_table(rows))
    return EXIT_OK
