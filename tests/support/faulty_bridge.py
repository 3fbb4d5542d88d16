"""``python -m tests.support.faulty_bridge [fault options]``: the bridge as ``python -m app run``
starts it (settings from ``BRIDGE_*`` and the config file), composed with a test's faults.

Options:
    --abort-every K: abort every K-th checkpoint with records after its flush.
    --pause-file P: SIGSTOP at the first checkpoint after P appears, before its offsets.
    --shared-transactional-id: two clusters, every task shares the instance's transactional id
        (per-partition fencing off: NOT exactly-once; shows what the zombie test catches).
    --same-epoch-after-abort: the next transaction keeps an aborted one's producer epoch
        (librdkafka's own behaviour; shows what the delayed-produce test catches).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from app import runner
from app.config import load_settings
from app.ops import logs
from tests.support.faults import bridge_faults


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.faulty_bridge")
    parser.add_argument("--abort-every", type=int, default=0, metavar="K")
    parser.add_argument("--pause-file", type=Path, metavar="P")
    parser.add_argument("--shared-transactional-id", action="store_true")
    parser.add_argument("--same-epoch-after-abort", action="store_true")
    args = parser.parse_args(argv)
    settings = load_settings()
    logs.setup(settings.log_level, settings.log_format)
    shared = settings.transactional_id if args.shared_transactional_id else None
    if shared:
        logging.getLogger(__name__).warning("every task shares %s (NOT exactly-once)", shared)
    if args.same_epoch_after_abort:
        logging.getLogger(__name__).warning("no new epoch after aborts (test fault)")
    faults = bridge_faults(args.abort_every, args.pause_file, shared, args.same_epoch_after_abort)
    return runner.run(settings, faults=faults)


if __name__ == "__main__":
    raise SystemExit(main())
