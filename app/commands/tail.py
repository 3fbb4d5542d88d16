"""``eos-bridge tail TOPIC``: print records as a downstream ``read_committed`` reader sees them.

``--uncommitted`` reads with ``read_uncommitted`` instead and so also shows records of aborted
transactions: what a consumer with Kafka's default isolation would process. A value in the
Schema Registry's framing read without ``--value-format`` stops the tail with one line naming
the format to add and the schema ID.
"""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from app.commands.connect import EXIT_OK, Subparsers, connection, tool_parser
from app.commands.formats import add_registry_args, codec, decode, framing_hint
from app.errors import ConfigError, DeserializationError
from app.kafka.admin import require_topics
from app.kafka.topics import end_offsets, partitions_of
from app.serde import REGISTRY_FORMATS, Codec, Role, json


def add_parser(sub: Subparsers) -> None:
    """Register ``tail``."""
    parser = tool_parser(sub, "tail", "print a topic's records (read_committed by default)")
    parser.add_argument("topic")
    parser.add_argument("--from-beginning", action="store_true", help="default: only new ones")
    parser.add_argument("--uncommitted", action="store_true", help="read_uncommitted: aborted too")
    parser.add_argument("--max", type=int, metavar="N", help="exit after N records")
    parser.add_argument(
        "--exit-at-end", action="store_true", help="exit at the end offsets seen at start"
    )
    parser.add_argument(
        "--format",
        choices=["value", "kv", "json"],
        default="value",
        help="value (default), KEY<TAB>VALUE, or a JSON object with the record's metadata",
    )
    add_registry_args(parser, "--value-format")
    parser.set_defaults(func=run)


def render(msg: Any, fmt: str, reader: Codec | None = None) -> str:
    """One output line for a consumed message; ``reader`` decodes a registry format (a record
    it cannot read is shown as ``<ErrorClass: why>``)."""
    value = (msg.value() or b"").decode("utf-8", "replace")
    if reader is not None and msg.value() is not None:
        try:
            value = json.dumps(decode(reader, msg.value(), msg.topic()), default=str).decode()
        except DeserializationError as exc:
            value = f"<{type(exc).__name__}: {exc}>"
    key = msg.key().decode("utf-8", "replace") if msg.key() is not None else None
    if fmt == "value":
        return value
    if fmt == "kv":
        return f"{key if key is not None else ''}\t{value}"
    try:
        decoded: Any = json.loads(value)
    except json.JSONDecodeError:
        decoded = value
    headers = {k: (v or b"").decode("utf-8", "replace") for k, v in msg.headers() or ()}
    return json.dumps(
        {
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp": msg.timestamp()[1],
            "key": key,
            "headers": headers,
            "value": decoded,
        }
    ).decode()


def run(args: argparse.Namespace) -> int:
    """Print records until ``--max``, the end (``--exit-at-end``) or Ctrl-C."""
    conn = connection(args)
    require_topics(conn, [("", args.topic)], args.timeout)
    reader = codec(args, "--value-format", Role.INPUT_VALUE)
    args.reader = reader if reader.name in REGISTRY_FORMATS else None
    committed = not args.uncommitted
    config = conn.client_config()
    consumer = Consumer(
        {
            **config,
            "group.id": "eos-bridge-tail",  # assign() only: never joins or commits
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    partitions = partitions_of(config, args.topic, args.timeout)
    # From the end, the end offsets seen at start are reached already: nothing to wait for.
    ends = {}
    if args.exit_at_end and args.from_beginning:
        ends = end_offsets(config, args.topic, committed, args.timeout)
    consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
    try:
        _print_until_done(consumer, args, ends)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a tail without --max/--exit-at-end ends
    finally:
        consumer.close()
    return EXIT_OK


def _print_until_done(consumer: Consumer, args: argparse.Namespace, ends: dict[int, int]) -> None:
    printed = 0
    floor = {
        p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), args.timeout)[0]
        for p in ends
    }
    pending = _pending(consumer, args.topic, ends, floor) if args.exit_at_end else None
    while pending is None or pending:
        for msg in consumer.consume(num_messages=500, timeout=0.5):
            error = msg.error()
            if error is not None:
                raise ConfigError(f"tail {args.topic!r}: {error.str()}")
            offset, partition = msg.offset() or 0, msg.partition() or 0
            if args.exit_at_end and offset >= ends.get(partition, 0):
                continue  # past the end seen at start (another partition is still behind)
            if args.reader is None and (hint := framing_hint(args, msg.value(), args.topic)):
                raise ConfigError(f"tail {hint}")  # not binary on the terminal: what to add
            print(render(msg, args.format, args.reader), flush=True)
            printed += 1
            if args.max is not None and printed >= args.max:
                return
        if pending is not None:
            pending = _pending(consumer, args.topic, ends, floor)


def _pending(
    consumer: Consumer, topic: str, ends: dict[int, int], floor: dict[int, int]
) -> set[int]:
    """Partitions whose position is still below the end offset seen at start.

    Decided by the position, never by "saw the last record": the last offset may be a
    transaction marker. A partition with nothing consumed yet has no position (< 0) and is
    pending only if records lie between its first offset (``floor``) and its end.
    """
    positions = consumer.position([TopicPartition(topic, p) for p in ends])
    return {
        tp.partition for tp in positions if ends[tp.partition] > max(tp.offset, floor[tp.partition])
    }
