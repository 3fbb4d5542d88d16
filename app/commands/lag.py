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
from dataclasses import dataclass

from app.commands.clusters import (
    TwoClusterSettings,
    add_target_args,
    committed_positions,
    two_cluster_settings,
)
from app.commands.connect import EXIT_OK, Subparsers, tool_parser
from app.errors import ConfigError
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
    parser = tool_parser(
        sub, "lag", "committed offsets vs end offsets of a consumer group", model=TwoClusterSettings
    )
    parser.add_argument("group", help="consumer group (the bridge's BRIDGE_GROUP_ID)")
    parser.add_argument("--topic", action="append", help="only these topics (repeat)")
    add_target_args(parser)
    parser.set_defaults(func=run)


def group_lag(
    conn: TwoClusterSettings, group: str, topics: list[str] | None, timeout: float
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
    settings = two_cluster_settings(args)
    rows, where = group_lag(settings, args.group, args.topic, args.timeout)
    if settings.cross_cluster:
        print(f"positions {where}; end offsets on {settings.bootstrap_servers}", file=sys.stderr)
    print(format_table(rows))
    return EXIT_OK
