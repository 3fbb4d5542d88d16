"""``python -m tests.support.replay_fault DLQ BATCH``: ``dlq replay`` with a fault handed to its
composition: transaction 2 is produced (and flushed) but held open forever, for the test to
SIGKILL the replay inside it. Settings come from ``BRIDGE_*`` as for ``eos-bridge``."""

from __future__ import annotations

import argparse
import sys
import threading

HOLDING = "replay fault: holding transaction 2 open"


class HoldSecondTransaction:
    def before_commit(self, transaction: int) -> None:
        if transaction == 2:
            print(HOLDING, flush=True)
            threading.Event().wait()


if __name__ == "__main__":
    from app.commands.replay import run_replay

    args = argparse.Namespace(
        topic=sys.argv[1], config=None, pipeline=None, to=None, batch=int(sys.argv[2]), wait=0.0
    )
    sys.exit(run_replay(args, HoldSecondTransaction()))
