"""``eos-bridge transactions TOPIC...``: per partition, the end offset, the last stable offset
and the gap between them, the offsets an open transaction holds back from ``read_committed``
readers (the same figure as ``eos_bridge_output_unstable_offsets``; docs/operations.md,
"Hanging transactions"). ``--group`` adds the group's changelog topics."""

from __future__ import annotations

import argparse

from confluent_kafka.admin import AdminClient

from app.commands.connect import EXIT_OK, Subparsers, connection, tool_parser
from app.errors import ConfigError
from app.kafka.stable import Partition, stable_offsets, written_partitions
from changelog.naming import changelog_prefix


def add_parser(sub: Subparsers) -> None:
    """Register ``transactions``."""
    parser = tool_parser(
        sub, "transactions", "offsets held back by open transactions (end - last stable offset)"
    )
    parser.add_argument("topic", nargs="*", help="topics (the bridge's outputs, dead letters)")
    parser.add_argument("--group", help="also the changelog topics of this BRIDGE_GROUP_ID")
    parser.set_defaults(func=run)


def format_table(rows: dict[Partition, tuple[int, int]]) -> str:
    """A plain table, one line per partition, with the partitions that have a gap counted."""
    width = max(len("TOPIC"), *(len(t) for t, _ in rows))
    lines = [f"{'TOPIC':<{width}}  PARTITION        END     STABLE   UNSTABLE"]
    for (topic, partition), (end, stable) in sorted(rows.items()):
        lines.append(
            f"{topic:<{width}}  {partition:>9}  {end:>9}  {stable:>9}  {max(0, end - stable):>9}"
        )
    held = sum(1 for end, stable in rows.values() if end > stable)
    lines.append(f"partitions with an open transaction: {held}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the gap of every partition of the topics (and the group's changelogs)."""
    if not args.topic and not args.group:
        raise ConfigError("name at least one topic or --group")
    admin = AdminClient(connection(args).client_config())
    prefix = changelog_prefix(args.group) if args.group else ""
    partitions = written_partitions(admin, args.topic, prefix, args.timeout)
    if not partitions:
        raise ConfigError(f"no such topic: {', '.join(args.topic) or prefix + '*'}")
    print(format_table(stable_offsets(admin, partitions, args.timeout)))
    return EXIT_OK
