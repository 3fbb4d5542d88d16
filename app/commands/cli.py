"""The ``eos-bridge`` command line: one sub-command per job.

Exit codes: 0 success; 1 ``verify`` found a violation;
2 a usage, configuration or connection mistake (one line on stderr, never a traceback);
``run`` adds 3 (fatal Kafka error) and 4 (record failure with ``on_error=fail``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException

from app.commands import (
    completion,
    dlq,
    lag,
    produce,
    supervise,
    tail,
    topics,
    transactions,
    verify,
)
from app.commands.settings import EXIT_CODES, settings_epilog, unknown_env_warnings
from app.config import BridgeSettings, load_settings
from app.errors import ConfigError
from app.kafka.errors import describe
from app.ops import logs
from app.settings_checks import ineffective_settings

if TYPE_CHECKING:
    from app.pipeline.builder import Pipeline

EXIT_USAGE = 2
# ``check-config`` names the rebalance protocol the group runs (``group_protocol``).
GROUP_PROTOCOLS = {
    "classic": "classic (eager)",
    "consumer": "consumer (KIP-848, incremental rebalancing)",
}


def _settings(args: argparse.Namespace) -> BridgeSettings:
    overrides = {}
    if getattr(args, "pipeline", None):
        overrides["pipeline"] = args.pipeline
    return load_settings(args.config, **overrides)


def _warnings(settings: BridgeSettings) -> list[str]:
    """What ``run`` and ``check-config`` both warn about: variables that name no setting, and
    settings that have no effect with the others."""
    return [*unknown_env_warnings(os.environ), *ineffective_settings(settings)]


def cmd_run(args: argparse.Namespace) -> int:
    from app import runner

    try:
        settings = _settings(args)
    except ConfigError:  # a misspelled variable is often why: said as check-config says it
        for warning in unknown_env_warnings(os.environ):
            print(f"eos-bridge: warning: {warning}", file=sys.stderr)
        raise
    logs.setup(settings.log_level, settings.log_format)
    for warning in _warnings(settings):
        logging.getLogger("app.config").warning("%s", warning)
    return runner.run(settings)


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate the settings, compile the pipeline; with ``--check-topics`` also make every
    start-up check ``run`` makes (app.engine.preflight.check_only), refusing with ``run``'s line."""
    from app.engine.repartition import regroup_plan
    from app.engine.wiring import build_pipeline

    settings = _settings(args)
    pipeline = build_pipeline(settings)
    plan = regroup_plan(settings, pipeline)  # two clusters: refused here too
    if args.check_topics:
        _start_up_checks(settings, pipeline)
    print(json.dumps(settings.masked(), indent=2, default=str))
    topics = ", topics exist" if args.check_topics else ""
    summary = pipeline.describe()
    if plan is not None:
        summary += f"; regrouped by step {plan.step!r} through repartition topic {plan.topic}"
    for warning in ineffective_settings(settings):  # the unknown variables: said by main
        print(f"eos-bridge: warning: {warning}", file=sys.stderr)
    protocol = GROUP_PROTOCOLS[settings.group_protocol]
    print(f"eos-bridge: group protocol: {protocol}", file=sys.stderr)
    print(f"eos-bridge: configuration ok: {summary}{topics}", file=sys.stderr)
    return 0


def _start_up_checks(settings: BridgeSettings, pipeline: Pipeline) -> None:
    """``run``'s start-up checks; a refusal is ``run``'s first error line (as a ConfigError:
    one line, exit 2, whatever ``run``'s code for it; a TimeoutError or an unreachable
    registry is exit 3 there, the restart trying again)."""
    from app.engine.preflight import check_only
    from app.engine.refusal import refusal
    from app.serde.registry_settings import RegistryUnavailable

    said_as = logging.StreamHandler(sys.stderr)  # what run logs as warnings, said as warnings
    said_as.setFormatter(logging.Formatter("eos-bridge: warning: %(message)s"))
    said_as.setLevel(logging.WARNING)
    logging.getLogger().addHandler(said_as)
    try:
        check_only(settings, pipeline)
    except (KafkaException, RegistryUnavailable, TimeoutError) as exc:
        said = refusal(exc, settings)
        if said is None:
            raise
        raise ConfigError(said.line) from None
    finally:
        logging.getLogger().removeHandler(said_as)


def cmd_reset_state(args: argparse.Namespace) -> int:
    from app.engine.wiring import state_root
    from app.state import reset_state

    settings = _settings(args)
    reset_state(state_root(settings))
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


def _bridge_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str
) -> argparse.ArgumentParser:
    """A sub-command that reads every bridge setting; its ``--help`` lists them all (and,
    for ``run``, its exit codes)."""
    epilog = settings_epilog(BridgeSettings)
    if name == "run":
        epilog += "\n\n" + EXIT_CODES
    parser = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, help="YAML/JSON config file (or BRIDGE_CONFIG_FILE)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eos-bridge", description="Exactly-once Kafka bridge")
    parser.add_argument("--version", action="version", version=f"eos-bridge {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = _bridge_command(sub, "run", "run the bridge (config from BRIDGE_* env / --config)")
    run.add_argument("--pipeline", help="Python pipeline as module:attr (or BRIDGE_PIPELINE)")
    run.set_defaults(func=cmd_run)
    supervise.add_parser(sub)

    check = _bridge_command(
        sub, "check-config", "print the effective config (secrets masked), compile the pipeline"
    )
    check.add_argument("--pipeline", help="Python pipeline as module:attr (or BRIDGE_PIPELINE)")
    check.add_argument(
        "--check-topics",
        action="store_true",
        help="also make every start-up check run makes: clusters, credentials, ACLs, each "
        "topic on its cluster, registries and output schemas (registered as run does)",
    )
    check.set_defaults(func=cmd_check_config)

    verify.add_parser(sub)
    reset = _bridge_command(
        sub, "reset-state", "wipe local state on purpose (it is rebuilt from the changelogs)"
    )
    reset.set_defaults(func=cmd_reset_state)

    spark = sub.add_parser("spark", help="run a Spark job: stream | backfill (then its options)")
    spark.add_argument("job", choices=["stream", "backfill"])
    spark.add_argument("job_args", nargs=argparse.REMAINDER)
    spark.set_defaults(func=cmd_spark)

    for tool in (topics, produce, tail, lag, transactions, dlq):
        tool.add_parser(sub)
    completion.add_parser(sub, parser)
    return parser


def _version() -> str:
    try:
        return version("eos-bridge")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script: user mistakes become one line and exit 2."""
    args = build_parser().parse_args(argv)
    if args.command != "run":  # run logs them, in the configured log format
        for warning in unknown_env_warnings(os.environ):
            print(f"eos-bridge: warning: {warning}", file=sys.stderr)
    name = " ".join(p for p in (args.command, getattr(args, "action", None)) if p)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"eos-bridge {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaException as exc:  # the tools talk to Kafka directly
        print(f"eos-bridge {name}: {describe(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except TimeoutError as exc:  # an admin request the broker did not answer in time
        why = f": {exc}" if str(exc) else ""
        print(f"eos-bridge {name}: Kafka did not answer in time{why}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
