"""Test-only fault points. Inert unless ``EOS_SPARK_FAULT`` names one.

``EOS_SPARK_FAULT=crash_after_delta_write:<batch id>`` ends the process right after the Delta
commit of that micro-batch and before Spark writes the batch's checkpoint commit, the window in
which a crash must not lead to counting the batch twice.
"""

from __future__ import annotations

import os
import sys

FAULT_ENV = "EOS_SPARK_FAULT"
FAULT_EXIT_CODE = 86
AFTER_DELTA_WRITE = "crash_after_delta_write"


def crash_point(point: str, batch_id: int) -> None:
    """Exit the process at once if the environment asks for a crash at ``point`` of this batch."""
    if os.environ.get(FAULT_ENV) == f"{point}:{batch_id}":
        print(f"fault injected: {point} batch {batch_id}", file=sys.stderr, flush=True)
        os._exit(FAULT_EXIT_CODE)
