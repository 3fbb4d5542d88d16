"""``eos-bridge topics create|list|describe``: topic administration without Kafka's own CLI."""

from __future__ import annotations

import argparse

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from app.commands.connect import EXIT_OK, Subparsers, connection, tool_parser
from app.errors import ConfigError
from app.kafka.admin import cluster_metadata
from app.kafka.topics import create_topic


def add_parser(sub: Subparsers) -> None:
    """Register ``topics`` and its actions."""
    parser = sub.add_parser("topics", help="create, list and describe topics")
    actions = parser.add_subparsers(dest="action", required=True)

    create = tool_parser(
        actions, "create", "create a topic and wait until it has leaders", "--config-file"
    )
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=1)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument(
        "--config",
        dest="topic_config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config, e.g. cleanup.policy=compact (repeat)",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="exit 0 when the topic exists already"
    )
    create.set_defaults(func=cmd_create)

    listing = tool_parser(actions, "list", "list topic names (internal ones with --all)")
    listing.add_argument("--all", action="store_true", help="include __consumer_offsets etc.")
    listing.set_defaults(func=cmd_list)

    describe = tool_parser(actions, "describe", "partitions, leaders and non-default configs")
    describe.add_argument("name")
    describe.set_defaults(func=cmd_describe)


def _topic_config(pairs: list[str]) -> dict[str, str]:
    config = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config {pair!r}: expected KEY=VALUE, e.g. retention.ms=86400000")
        config[key] = value
    return config


def cmd_create(args: argparse.Namespace) -> int:
    """Create the topic; exit 2 when it exists (unless ``--if-not-exists``) or is refused."""
    conn = connection(args)
    config = _topic_config(args.topic_config)
    if args.name in cluster_metadata(conn, args.timeout).topics:
        if args.if_not_exists:
            print(f"topic {args.name!r} exists already")
            return EXIT_OK
        raise ConfigError(f"topic {args.name!r} exists already (add --if-not-exists to accept)")
    try:
        create_topic(
            conn.client_config(),
            args.name,
            args.partitions,
            args.replication_factor,
            config,
            timeout=args.timeout,
        )
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        raise ConfigError(f"cannot create topic {args.name!r}: {error.str()}") from None
    print(f"created topic {args.name!r} with {args.partitions} partition(s)")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    """Print one topic name per line, sorted."""
    names = sorted(cluster_metadata(connection(args), args.timeout).topics)
    for name in names:
        if args.all or not name.startswith("__"):
            print(name)
    return EXIT_OK


def cmd_describe(args: argparse.Namespace) -> int:
    """Print the partitions (leader, replicas, in-sync) and the configs not at their default."""
    conn = connection(args)
    meta = cluster_metadata(conn, args.timeout).topics.get(args.name)
    if meta is None or meta.error is not None:
        raise ConfigError(f"topic {args.name!r} does not exist on {conn.bootstrap_servers}")
    print(f"topic {args.name}: {len(meta.partitions)} partition(s)")
    for p in sorted(meta.partitions.values(), key=lambda p: p.id):
        print(f"  partition {p.id}: leader {p.leader} replicas {p.replicas} isr {p.isrs}")
    resource = ConfigResource(ResourceType.TOPIC, args.name)
    admin = AdminClient(conn.client_config())
    configs = admin.describe_configs([resource])[resource].result(args.timeout)
    for key, entry in sorted(configs.items()):
        if not entry.is_default:
            print(f"  {key}={entry.value}")
    return EXIT_OK
