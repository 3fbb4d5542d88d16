"""Late records, seen: one WARNING per checkpoint that dropped any, as for dead letters.

Window steps have no logger of the checkpoint at hand, so they note what they dropped here
(once per batch, like :data:`app.ops.metrics.LATE_RECORDS`); the output reports it when the
transaction holding those records commits and forgets it when that transaction aborts (the
replay drops them again and notes them again).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("app.pipeline.late")

_EXAMPLE_CHARS = 200


@dataclass(slots=True)
class _Dropped:
    count: int
    first: str
    grace_ms: int


class LateLog:
    """Late records dropped in the open transaction, per window step."""

    def __init__(self) -> None:
        self._pending: dict[str, _Dropped] = {}

    def note(self, step: str, count: int, first: str, grace_ms: int) -> None:
        """``count`` late records of ``step`` dropped; ``first`` tells the first one."""
        have = self._pending.get(step)
        if have is None:
            self._pending[step] = _Dropped(count, first[:_EXAMPLE_CHARS], grace_ms)
        else:
            have.count += count

    def snapshot(self) -> dict[str, tuple[int, str, int]]:
        """What is noted now (:meth:`restore` goes back to it: a batch run again)."""
        return {step: (d.count, d.first, d.grace_ms) for step, d in self._pending.items()}

    def restore(self, snapshot: dict[str, tuple[int, str, int]]) -> None:
        self._pending = {step: _Dropped(*v) for step, v in snapshot.items()}

    def discard(self) -> None:
        """The transaction aborted: its records will be processed (and noted) again."""
        self._pending = {}

    def flush(self) -> str | None:
        """The transaction committed: one WARNING line for what it dropped (the line, or
        None when nothing was late)."""
        pending, self._pending = self._pending, {}
        if not pending:
            return None
        dropped = sum(d.count for d in pending.values())
        parts = [
            f"window {step!r} {d.count} (grace {d.grace_ms / 1000:g} s; first {d.first})"
            for step, d in sorted(pending.items(), key=lambda kv: -kv[1].count)
        ]
        line = f"dropped {dropped} late record(s) in this checkpoint: " + "; ".join(parts)
        log.warning("%s", line)
        return line


LATE_LOG = LateLog()
