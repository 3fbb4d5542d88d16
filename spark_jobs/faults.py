"""Fault points of the streaming job, a seam for the test rig (never a setting or a variable).

The job's own composition passes :data:`NO_FAULTS`; the driver-crash tests start the job through
their launcher (``python -m tests.spark.faulty_stream --crash <point>:<batch id> ...``), which
hands :func:`spark_jobs.stream.launch` a :class:`Faults` that ends the process at one point:

- ``crash_after_delta_write``: right after the Delta commit of that micro-batch and before Spark
  writes the batch's checkpoint commit, the window in which a crash must not lead to counting
  the batch twice (exit code 86);
- ``crash_before_delta_write``: before the Delta MERGE of that batch (SIGKILL, as a node
  failure would);
- ``crash_before_kafka_commit``: the Kafka results and marker of that batch are produced,
  their transaction not committed (SIGKILL);
- ``crash_after_kafka_commit``: the transaction is committed, Spark's checkpoint commit of the
  batch not written (SIGKILL).
"""

from __future__ import annotations

AFTER_DELTA_WRITE = "crash_after_delta_write"
BEFORE_DELTA_WRITE = "crash_before_delta_write"
BEFORE_KAFKA_COMMIT = "crash_before_kafka_commit"
AFTER_KAFKA_COMMIT = "crash_after_kafka_commit"
POINTS = (AFTER_DELTA_WRITE, BEFORE_DELTA_WRITE, BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT)


class Faults:
    """The job's fault points; this one does nothing at any of them."""

    def at(self, point: str, batch_id: int) -> None:
        """Called at ``point`` of micro-batch ``batch_id``."""


NO_FAULTS = Faults()
