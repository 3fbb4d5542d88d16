"""``python -m devkit.kafka start|stop|status``: a long-lived local broker for you and the docs.

Exit codes: 0 done (``status``: running); 1 ``status``: not running; 2 Java or Maven missing,
or the broker did not start (one line on stderr, or the broker's last log lines).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from devkit.kafka.cluster import LocalKafka, LocalKafkaError
from devkit.kafka.jars import EnvironmentProblem, cache_home
from devkit.kafka.security import write_client_settings

PROG = "python -m devkit.kafka"
DEFAULT_PORT = 19092
# Another place and port for a second dev broker (the doc tests run README's commands on one).
DIR_ENV, PORT_ENV = "EOS_BRIDGE_DEV_KAFKA_DIR", "EOS_BRIDGE_DEV_KAFKA_PORT"


def build_parser() -> argparse.ArgumentParser:
    """The launcher's command line."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Start, stop or show a local Kafka broker for development."
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    default_dir = Path(os.environ.get(DIR_ENV) or cache_home() / "dev-kafka")
    parser.add_argument("--dir", type=Path, default=default_dir, help=f"default: ${DIR_ENV}")
    parser.add_argument("--brokers", type=int, choices=[1, 3], default=1)
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get(PORT_ENV) or DEFAULT_PORT),
        help=f"client port of broker 1 (default ${PORT_ENV} or {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="also SASL_SSL (SCRAM-SHA-512) and mTLS listeners, with ACLs (see docs/security.md)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Carry out one action; returns the exit code."""
    existing = LocalKafka.attach(args.dir)
    running = existing is not None and any(b.alive() for b in existing.brokers)
    if args.action == "status":
        if existing is None or not running:
            print("dev-kafka: not running")
            return 1
        for b in existing.brokers:
            print(f"broker {b.node_id}: {'up' if b.alive() else 'down'} pid={b.pid} {b.bootstrap}")
        print(f"bootstrap: {existing.bootstrap}")
        if existing.brokers[0].sasl_port:
            print(f"SASL_SSL: {existing.sasl_bootstrap}  mTLS: {existing.mtls_bootstrap}")
        return 0
    if args.action == "stop":
        if existing is not None:
            existing.stop()
        print("dev-kafka: stopped")
        return 0
    if running and existing is not None:
        print(f"dev-kafka: already running, bootstrap {existing.bootstrap}")
        return 0
    try:
        cluster = LocalKafka(
            args.dir, args.brokers, tied_to_parent=False, first_port=args.port, secure=args.secure
        )
        cluster.start()
    except (EnvironmentProblem, LocalKafkaError) as exc:
        print(f"dev-kafka: {exc}", file=sys.stderr)
        return 2
    print(f"dev-kafka: started, bootstrap {cluster.bootstrap} (stop: {PROG} stop)")
    if cluster.security is not None:
        for path in write_client_settings(cluster, cluster.security):
            print(f"dev-kafka: secure listener settings for the bridge in {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devkit.kafka``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
