"""``python -m devkit.registry start|stop|status``: a long-lived local Schema Registry.

Exit codes: 0 done (``status``: running); 1 ``status``: not running; 2 Java or Maven missing,
or the registry did not start (one line on stderr, or the registry's last log lines).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from devkit.registry.build import EnvironmentProblem
from devkit.registry.server import LocalRegistry, LocalRegistryError
from spark_jobs.maven import cache_home

PROG = "python -m devkit.registry"
DEFAULT_PORT = 18081
# Another place and port for a second dev registry (the doc tests run docs' commands on one).
DIR_ENV, PORT_ENV = "EOS_BRIDGE_DEV_REGISTRY_DIR", "EOS_BRIDGE_DEV_REGISTRY_PORT"


def build_parser() -> argparse.ArgumentParser:
    """The launcher's command line."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Start, stop or show a local Schema Registry for development."
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    default_dir = Path(os.environ.get(DIR_ENV) or cache_home() / "dev-registry")
    parser.add_argument("--dir", type=Path, default=default_dir, help=f"default: ${DIR_ENV}")
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get(PORT_ENV) or DEFAULT_PORT),
        help=f"HTTP port on 127.0.0.1 (default ${PORT_ENV} or {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--secure", action="store_true", help="HTTPS only, with a dev CA (printed at start)"
    )
    parser.add_argument(
        "--compatibility",
        default="BACKWARD",
        help="global compatibility level set after start (the registry's own default is NONE)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Carry out one action; returns the exit code."""
    existing = LocalRegistry.attach(args.dir)
    running = existing is not None and existing.alive()
    if args.action == "status":
        if existing is None or not running:
            print("dev-registry: not running")
            return 1
        print(f"dev-registry: up pid={existing.pid} url {existing.url}")
        return 0
    if args.action == "stop":
        if existing is not None:
            existing.stop()
        print("dev-registry: stopped")
        return 0
    if running and existing is not None:
        print(f"dev-registry: already running, url {existing.url}")
        return 0
    registry = LocalRegistry(args.dir, args.port, tied_to_parent=False, secure=args.secure)
    try:
        registry.start()
        registry.set_compatibility(args.compatibility)
    except (EnvironmentProblem, LocalRegistryError, OSError) as exc:
        registry.stop()
        print(f"dev-registry: {exc}", file=sys.stderr)
        return 2
    print(f"dev-registry: started, url {registry.url} (stop: {PROG} stop)")
    if registry.ca is not None:
        print(f"dev-registry: its CA (the codecs' ca_location) is {registry.ca}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devkit.registry``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
