"""``eos-bridge dlq summary|show|replay TOPIC``: operate a dead-letter topic.

``summary`` and ``show`` read the topic ``read_committed`` from the beginning to the end
offsets seen at start (a dead letter of an aborted transaction was never a dead letter):
counts by step, error class and source topic with the first and last source offsets, or each
one with its error headers, as JSON lines, filtered by class or step.

``replay`` writes the dead letters back to their input topics for the running bridge
(app.commands.replay).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from app.commands.connect import EXIT_OK, Subparsers, connection, tool_parser
from app.commands.replay import run_replay
from app.commands.settings import settings_epilog
from app.config import BridgeSettings
from app.kafka.admin import require_topics
from app.kafka.topics import KafkaRecord, read_all
from app.serde import json

H_PREFIX = "eos.dlq."


@dataclass(slots=True)
class Group:
    """Dead letters of one step, error class and source topic."""

    count: int = 0
    first: dict[int, int] = field(default_factory=dict)  # source partition → lowest offset
    last: dict[int, int] = field(default_factory=dict)

    def add(self, partition: int, offset: int) -> None:
        self.count += 1
        self.first[partition] = min(offset, self.first.get(partition, offset))
        self.last[partition] = max(offset, self.last.get(partition, offset))


def add_parser(sub: Subparsers) -> None:
    """Register ``dlq summary`` and ``dlq show``."""
    parser = sub.add_parser("dlq", help="read a dead-letter topic: summary | show")
    actions = parser.add_subparsers(dest="dlq_command", required=True)
    summary = tool_parser(actions, "summary", "dead letters by step, error class, source topic")
    summary.add_argument("topic")
    summary.add_argument("--json", action="store_true", help="one JSON object per group")
    summary.set_defaults(func=run_summary)
    show = tool_parser(actions, "show", "each dead letter with its error headers (JSON lines)")
    show.add_argument("topic")
    show.add_argument("--error-class", metavar="CLASS", help="only this eos.dlq.error.class")
    show.add_argument("--step", help="only this eos.dlq.error.step")
    show.add_argument("--max", type=int, metavar="N", help="at most N records")
    show.set_defaults(func=run_show)
    replay = actions.add_parser(
        "replay",
        help="write dead letters back to their input topic (or --to a topic), once",
        description="write the dead letters of TOPIC up to its end offsets back to their input "
        "topics, exactly once, for the running bridge to process with its live state",
        epilog=settings_epilog(BridgeSettings),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("topic")
    replay.add_argument("--config", type=Path, help="YAML/JSON config file (or BRIDGE_CONFIG_FILE)")
    replay.add_argument("--pipeline", help=argparse.SUPPRESS)  # refused: names the new way
    replay.add_argument("--to", metavar="TOPIC", help="copy the dead letters to TOPIC instead")
    replay.add_argument(
        "--batch", type=int, default=1000, metavar="N", help="dead letters per transaction"
    )
    replay.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="then wait up to SECONDS for the bridge to process them; count those that fail again",
    )
    replay.set_defaults(func=run_replay)


def headers_of(record: KafkaRecord) -> dict[str, str]:
    """The record's headers as text (the error headers are UTF-8)."""
    return {k: (v or b"").decode("utf-8", "replace") for k, v in record.headers or ()}


def summarize(records: Iterable[KafkaRecord]) -> dict[tuple[str, str, str], Group]:
    """(step, error class, source topic) → count and source offsets."""
    groups: dict[tuple[str, str, str], Group] = {}
    for record in records:
        h = headers_of(record)
        key = (
            h.get("eos.dlq.error.step", "?"),
            h.get("eos.dlq.error.class", "?"),
            h.get("eos.dlq.source.topic", "?"),
        )
        group = groups.setdefault(key, Group())
        group.add(_number(h, "eos.dlq.source.partition"), _number(h, "eos.dlq.source.offset"))
    return groups


def _number(headers: dict[str, str], name: str) -> int:
    """A numeric source header, -1 when missing or not a number (a dead letter written by
    another tool, or spoofed upstream): the summary still counts it."""
    try:
        return int(headers.get(name, -1))
    except ValueError:
        return -1


def run_summary(args: argparse.Namespace) -> int:
    records = _read(args)
    groups = summarize(records)
    if args.json:
        for (step, error_class, source), g in sorted(groups.items()):
            row = {
                "step": step,
                "error_class": error_class,
                "source_topic": source,
                "count": g.count,
                "first": g.first,
                "last": g.last,
            }
            print(json.dumps(row).decode())
        return EXIT_OK
    print(f"{len(records)} dead letters in {args.topic!r}")
    for (step, error_class, source), g in sorted(groups.items(), key=lambda kv: -kv[1].count):
        spans = ", ".join(f"[{p}] {g.first[p]}..{g.last[p]}" for p in sorted(g.first))
        print(f"{g.count:>8}  {error_class}  step {step!r}  from {source} {spans}")
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    shown = 0
    for record in _read(args):
        h = headers_of(record)
        if args.error_class and h.get("eos.dlq.error.class") != args.error_class:
            continue
        if args.step and h.get("eos.dlq.error.step") != args.step:
            continue
        print(json.dumps(_shown(record, h)).decode())
        shown += 1
        if args.max is not None and shown >= args.max:
            break
    return EXIT_OK


def _shown(record: KafkaRecord, h: dict[str, str]) -> dict[str, object]:
    raw = (record.value or b"").decode("utf-8", "replace")
    try:
        value: object = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return {
        "offset": record.offset,
        "error": {k.removeprefix(H_PREFIX): v for k, v in h.items() if k.startswith(H_PREFIX)},
        "key": record.key.decode("utf-8", "replace") if record.key is not None else None,
        "value": value,
        "headers": {k: v for k, v in h.items() if not k.startswith(H_PREFIX)},
    }


def _read(args: argparse.Namespace) -> list[KafkaRecord]:
    conn = connection(args)
    require_topics(conn, [("", args.topic)], args.timeout)
    return read_all(conn.client_config(), args.topic, True, max(args.timeout, 60.0))
