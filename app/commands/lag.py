"""``eos-bridge lag GROUP``: a consumer group's committed offsets against the end offsets.

For the bridge, the committed offsets are those committed inside its transactions, so the
lag is what is left to process after the last checkpoint.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient

from app.commands.connect import EXIT_OK, Subparsers, connection, tool_parser
from app.config import ConnectionSettings
from app.errors import ConfigError
from app.kafka.errors import describe
from app.kafka.topics import end_offsets


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
    parser = tool_parser(sub, "lag", "committed offsets vs end offsets of a consumer group")
    parser.add_argument("group", help="consumer group (the bridge's BRIDGE_GROUP_ID)")
    parser.add_argument("--topic", action="append", help="only these topics (repeat)")
    parser.set_defaults(func=run)


def group_lag(
    conn: ConnectionSettings, group: str, topics: list[str] | None, timeout: float
) -> list[PartitionLag]:
    """Lag of every partition ``group`` has committed offsets for (optionally of ``topics``)."""
    admin = AdminClient(conn.client_config())
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        answer = admin.list_consumer_group_offsets(request)[group].result(timeout)
    except KafkaException as exc:
        raise ConfigError(f"cannot read the offsets of group {group!r}: {describe(exc)}") from None
    committed = {
        (tp.topic, tp.partition): tp.offset
        for tp in answer.topic_partitions
        if tp.offset >= 0 and (not topics or tp.topic in topics)
    }
    if not committed:
        raise ConfigError(
            f"group {group!r} has no committed offsets on {conn.bootstrap_servers}"
            + (f" for topics {topics}" if topics else "")
            + " (check the name: the bridge's group is BRIDGE_GROUP_ID, default eos-bridge)"
        )
    ends: dict[str, dict[int, int]] = {}
    for topic in sorted({t for t, _ in committed}):
        ends[topic] = end_offsets(conn.client_config(), topic, read_committed=False)
    return [
        PartitionLag(topic, partition, offset, ends[topic].get(partition, offset))
        for (topic, partition), offset in sorted(committed.items())
    ]


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
    """Print the group's lag per partition and in total."""
    rows = group_lag(connection(args), args.group, args.topic, args.timeout)
    print(format_table(rows))
    return EXIT_OK
