"""``python -m tests.spark.faulty_stream --crash <point>:<batch id> <stream job options>``: the
streaming job (``python -m spark_jobs.stream``) composed with a crash at one fault point of one
micro-batch (:mod:`spark_jobs.faults` lists the points): the test rig's launcher, so the job
itself reads no fault switch."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

from spark_jobs import stream
from spark_jobs.faults import (
    AFTER_KAFKA_COMMIT,
    BEFORE_DELTA_WRITE,
    BEFORE_KAFKA_COMMIT,
    POINTS,
    Faults,
)

FAULT_EXIT_CODE = 86  # crash_after_delta_write exits with it; the other points SIGKILL
_SIGKILL = frozenset({BEFORE_DELTA_WRITE, BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT})


class CrashAt(Faults):
    """End the process at ``point`` of batch ``batch_id`` (SIGKILL, as a node failure would,
    or exit 86 after the Delta write)."""

    def __init__(self, point: str, batch_id: int) -> None:
        if point not in POINTS:
            raise ValueError(f"unknown fault point {point!r}; one of {', '.join(POINTS)}")
        self.point, self.batch_id = point, batch_id

    @classmethod
    def parse(cls, spec: str) -> CrashAt:
        """``<point>:<batch id>``."""
        point, _, batch = spec.rpartition(":")
        return cls(point, int(batch))

    def at(self, point: str, batch_id: int) -> None:
        if (point, batch_id) != (self.point, self.batch_id):
            return
        print(f"fault injected: {point} batch {batch_id}", file=sys.stderr, flush=True)
        if point in _SIGKILL:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(FAULT_EXIT_CODE)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "--crash":
        raise SystemExit("usage: python -m tests.spark.faulty_stream --crash <point>:<batch> ...")
    return stream.launch(args[2:], CrashAt.parse(args[1]))


if __name__ == "__main__":
    raise SystemExit(main())
