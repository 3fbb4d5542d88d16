"""The ``eos-bridge`` command line: one sub-command per job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.devkafka import command as dev_kafka


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eos-bridge", description="Exactly-once Kafka-to-Kafka bridge"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    dev_kafka.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
