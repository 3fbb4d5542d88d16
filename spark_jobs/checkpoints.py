"""A streaming checkpoint belongs to one aggregation: its state is shaped by the spec.

Spark refuses to restart a query whose aggregation changed only deep inside the first batch,
with pages of state-schema errors. The job records the spec's shape next to Spark's files and
refuses a different one at start, in one line, before Spark reads anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.errors import JobConfigError
from spark_jobs.evolution import Shape

SHAPE_FILE = "eosbridge-spec-shape.json"


def claim_checkpoint(checkpoint: str, shape: Shape) -> None:
    """Record ``shape`` in a new local checkpoint, or check an existing one was made for it.

    Checkpoints on another file system (``s3a://``...) are not checked here.
    """
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return
    root = Path(checkpoint.removeprefix("file://").removeprefix("file:"))
    marker = root / SHAPE_FILE
    wanted = json.dumps(shape, sort_keys=True)
    if marker.exists():
        if marker.read_text() != wanted:
            raise JobConfigError(
                f"--checkpoint {checkpoint} holds the state of another spec (its aggregation "
                "changed); use a new --checkpoint (from earliest to recompute every row)"
            )
        return
    if root.exists() and any(root.iterdir()):
        return  # made before the marker existed: nothing to compare with
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text(wanted)
