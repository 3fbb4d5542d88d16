"""The streaming job as a scheduler would start it, with the test rig's crash hook handed in.

``python -m tests.spark.iceberg_launcher POINT BATCH JOB-ARGS...`` runs
:func:`spark_jobs.stream.launch` with a fault hook that SIGKILLs this process (the driver)
at ``POINT`` (``before_commit`` or ``after_commit``, the Iceberg catalog commit) of micro-batch
``BATCH``. The fault comes in through the composition, never through a setting the job reads.
"""

from __future__ import annotations

import os
import signal
import sys

from spark_jobs.iceberg.sink import FaultHook
from spark_jobs.stream import launch


def sigkill_at(point: str, batch: int) -> FaultHook:
    def hook(at: str, batch_id: int) -> None:
        if (at, batch_id) == (point, batch):
            print(f"fault injected: SIGKILL {at} batch {batch_id}", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


if __name__ == "__main__":
    sys.exit(launch(sys.argv[3:], sigkill_at(sys.argv[1], int(sys.argv[2]))))
