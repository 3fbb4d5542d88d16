"""What every tool shares: connection options on top of the ``BRIDGE_*`` settings, exit codes.

A tool reaches Kafka exactly as the bridge does (bootstrap servers, SASL, TLS and any
librdkafka setting of the ``kafka`` map), so a command that works for a tool works for the
bridge and the other way round.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from app.commands.settings import settings_epilog
from app.config import ConnectionSettings, load_connection
from app.errors import ConfigError

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2
DEFAULT_TIMEOUT = 15.0

# Quoted: argparse._SubParsersAction is generic only for type checkers.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def tool_parser(
    sub: Subparsers,
    name: str,
    help: str,
    config_flag: str = "--config",
    model: type[ConnectionSettings] = ConnectionSettings,
) -> argparse.ArgumentParser:
    """A sub-command whose ``--help`` ends with its settings (``model``: the connection
    settings unless the tool reads more) and their env names."""
    parser = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=settings_epilog(model, "connection settings"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(parser, config_flag)
    return parser


def add_connection_args(
    parser: argparse.ArgumentParser, config_flag: str = "--config", timeout: bool = True
) -> None:
    """``--bootstrap``, ``--config`` and ``--timeout``; everything else comes from BRIDGE_*.

    ``config_flag`` renames the config file option where ``--config`` means something else
    (``topics create --config KEY=VALUE``, like Kafka's own tool).
    """
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--bootstrap", metavar="HOST:PORT", help="overrides BRIDGE_BOOTSTRAP_SERVERS"
    )
    group.add_argument(
        config_flag, dest="config", type=Path, help="YAML/JSON config file (or BRIDGE_CONFIG_FILE)"
    )
    if not timeout:
        return
    group.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds to wait for the broker (default {DEFAULT_TIMEOUT:.0f})",
    )


def connection(args: argparse.Namespace) -> ConnectionSettings:
    """The connection settings, with ``--bootstrap`` over the environment and the file."""
    overrides = {"bootstrap_servers": args.bootstrap} if args.bootstrap else {}
    if args.config is not None and not args.config.exists():
        raise ConfigError(f"config file {args.config} does not exist")
    return load_connection(args.config, **overrides)
