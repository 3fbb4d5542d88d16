"""Test-only fault points. Inert unless ``EOS_SPARK_FAULT`` names one.

``EOS_SPARK_FAULT=crash_after_delta_write:<batch id>`` ends the process right after the Delta
commit of that micro-batch and before Spark writes the batch's checkpoint commit, the window in
which a crash must not lead to counting the batch twice. The points below SIGKILL the process
(as a node failure would) instead:

- ``crash_before_delta_write:<batch id>``: before the Delta MERGE of that batch;
- ``crash_before_kafka_commit:<batch id>``: the Kafka results and marker of that batch are
  produced, their transaction not committed;
- ``crash_after_kafka_commit:<batch id>``: the transaction is committed, Spark's checkpoint
  commit of the batch not written.
"""

from __future__ import annotations

import os
import signal
import sys

FAULT_ENV = "EOS_SPARK_FAULT"
FAULT_EXIT_CODE = 86
AFTER_DELTA_WRITE = "crash_after_delta_write"
BEFORE_DELTA_WRITE = "crash_before_delta_write"
BEFORE_KAFKA_COMMIT = "crash_before_kafka_commit"
AFTER_KAFKA_COMMIT = "crash_after_kafka_commit"
_SIGKILL = frozenset({BEFORE_DELTA_WRITE, BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT})


def crash_point(point: str, batch_id: int) -> None:
    """Exit the process at once if the environment asks for a crash at ``point`` of this batch."""
    if os.environ.get(FAULT_ENV) == f"{point}:{batch_id}":
        print(f"fault injected: {point} batch {batch_id}", file=sys.stderr, flush=True)
        if point in _SIGKILL:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(FAULT_EXIT_CODE)
