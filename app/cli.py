"""The ``eos-bridge`` command line: one sub-command per job."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from app import logs, verify
from app.config import load_settings
from app.devkafka import command as dev_kafka
from app.errors import ConfigError


def _settings(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    overrides = {}
    if getattr(args, "pipeline", None):
        overrides["pipeline"] = args.pipeline
    return load_settings(args.config, **overrides)


def cmd_run(args: argparse.Namespace) -> int:
    from app import runner

    try:
        settings = _settings(args)
    except ConfigError as exc:
        print(f"eos-bridge: {exc}", file=sys.stderr)
        return runner.EXIT_CONFIG
    logs.setup(settings.log_level, settings.log_format)
    return runner.run(settings)


def cmd_check_config(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
    except ConfigError as exc:
        print(f"eos-bridge: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(settings.masked(), indent=2, default=str))
    return 0


def cmd_reset_state(args: argparse.Namespace) -> int:
    from app.state import reset_state

    try:
        settings = _settings(args)
        reset_state(settings)
    except ConfigError as exc:
        print(f"eos-bridge: {exc}", file=sys.stderr)
        return 2
    print(
        f"eos-bridge: local state of group {settings.group_id!r} under {settings.state_dir} wiped"
    )
    return 0


def cmd_spark(args: argparse.Namespace) -> int:
    """Hand the remaining arguments to a Spark job (imported lazily: pyspark is an extra)."""
    try:
        if args.job == "stream":
            from spark_jobs.stream import main as job
        else:
            from spark_jobs.backfill import main as job
    except ImportError as exc:
        print(f"eos-bridge spark: install the spark extra ({exc})", file=sys.stderr)
        return 2
    code: int = job(args.job_args)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eos-bridge", description="Exactly-once Kafka bridge")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the bridge (config from BRIDGE_* env / --config)")
    run.add_argument("--config", type=Path, help="YAML/JSON config file (or BRIDGE_CONFIG_FILE)")
    run.add_argument("--pipeline", help="Python pipeline as module:attr (or BRIDGE_PIPELINE)")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check-config", help="print the effective config, secrets masked")
    check.add_argument("--config", type=Path)
    check.add_argument("--pipeline")
    check.set_defaults(func=cmd_check_config)

    verify.add_parser(sub)
    reset = sub.add_parser(
        "reset-state", help="wipe local state on purpose (it is rebuilt from the changelogs)"
    )
    reset.add_argument("--config", type=Path)
    reset.set_defaults(func=cmd_reset_state)

    spark = sub.add_parser("spark", help="run a Spark job: stream | backfill (then its options)")
    spark.add_argument("job", choices=["stream", "backfill"])
    spark.add_argument("job_args", nargs=argparse.REMAINDER)
    spark.set_defaults(func=cmd_spark)

    dev_kafka.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
