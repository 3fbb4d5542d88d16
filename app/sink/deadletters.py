"""Dead-letter accounting: a summary line per checkpoint, metrics per step and error class, and
the optional ``max_dead_letter_ratio`` readiness check.

:meth:`DeadLetters.add` is called for each dead letter written into the open transaction;
an abort drops them (:meth:`~DeadLetters.discard`) and a committed checkpoint hands them over
(:meth:`~DeadLetters.committed`), so every figure counts committed dead letters, each once,
and the log gets one line per checkpoint however many records failed.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline.errors import error_text
from app.pipeline.record import Failure

log = logging.getLogger(__name__)

# Below this many input records in the window the ratio says too little to act on.
MIN_RECORDS = 100
_EXAMPLE_CHARS = 200

Key = tuple[str, str]  # (step, error class)


@dataclass(slots=True)
class Tally:
    """Dead letters of one (step, error class): how many, and the first one's story."""

    count: int
    first: str


Tallies = dict[Key, Tally]


def summary_line(tallies: Tallies, consumed: int) -> str:
    """``dead-lettered D of N records in this checkpoint: step 's' Class n (first ...); ...``."""
    dead = sum(t.count for t in tallies.values())
    parts = [
        f"step {step!r} {cls} {t.count} (first {t.first})"
        for (step, cls), t in sorted(tallies.items(), key=lambda kv: -kv[1].count)
    ]
    return f"dead-lettered {dead} of {consumed} records in this checkpoint: " + "; ".join(parts)


def merge(parts: Iterable[Tallies]) -> Tallies:
    """Sum tallies; the first example of the earliest part is kept."""
    merged: Tallies = {}
    for tallies in parts:
        for key, t in tallies.items():
            have = merged.get(key)
            if have is None:
                merged[key] = Tally(t.count, t.first)
            else:
                have.count += t.count
    return merged


class DeadLetters:
    """Counts dead letters per step and error class, per checkpoint and over a time window.

    Args:
        metrics: where the counter and ratio gauges live.
        health: marked not ready while the ratio is above ``max_ratio``.
        max_ratio: dead letters / input records over the window above which the bridge is
            not ready (None: never).
        window_s: how many seconds of committed checkpoints the ratio covers.
        min_records: no verdict (the previous one stands) until the window holds this many
            input records.
        clock: seconds, monotonic (a seam for tests).
    """

    def __init__(
        self,
        metrics: Metrics,
        health: Health,
        max_ratio: float | None = None,
        window_s: float = 60.0,
        *,
        min_records: int = MIN_RECORDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._health = health
        self._max_ratio = max_ratio
        self._window_s = window_s
        self._min_records = min_records
        self._clock = clock
        self._pending: Tallies = {}
        self._window: deque[tuple[float, int, Tallies]] = deque()
        self._gauged: set[Key] = set()
        self.tripped = False

    def add(self, failure: Failure) -> None:
        """One dead letter written into the open transaction."""
        key = (failure.step, type(failure.error).__name__)
        tally = self._pending.get(key)
        if tally is None:
            row = failure.row
            where = f"{row.source_topic}[{row.partition}]@{row.offset}"
            self._pending[key] = Tally(1, f"{where}: {error_text(failure.error)[:_EXAMPLE_CHARS]}")
        else:
            tally.count += 1

    def discard(self) -> None:
        """The transaction was aborted: its dead letters were never written."""
        self._pending = {}

    def account(self, consumed: int) -> None:
        """A checkpoint of ``consumed`` input records committed: log, count, judge."""
        pending, self._pending = self._pending, {}
        for (step, cls), tally in pending.items():
            self._metrics.dead_letters.labels(step, cls).inc(tally.count)
        if pending:
            log.warning("%s", summary_line(pending, consumed))
        now = self._clock()
        self._window.append((now, consumed, pending))
        while self._window[0][0] < now - self._window_s:
            self._window.popleft()
        self._judge()

    def _judge(self) -> None:
        consumed = sum(c for _, c, _ in self._window)
        tallies = merge(t for _, _, t in self._window)
        for key in self._gauged - tallies.keys():
            self._metrics.dead_letter_ratio.labels(*key).set(0)
        for key, t in tallies.items():
            self._metrics.dead_letter_ratio.labels(*key).set(t.count / max(consumed, 1))
        self._gauged |= tallies.keys()
        if self._max_ratio is None or consumed < self._min_records:
            return
        ratio = min(1.0, sum(t.count for t in tallies.values()) / consumed)
        if ratio <= self._max_ratio:
            if self.tripped:
                self.tripped = False
                self._health.set_degraded(None)
                log.warning(
                    "dead-letter ratio %.1f%% over the last %.0fs is back within "
                    "max_dead_letter_ratio=%s: ready again",
                    100 * ratio,
                    self._window_s,
                    self._max_ratio,
                )
            return
        (step, cls), worst = max(tallies.items(), key=lambda kv: kv[1].count)
        self._health.set_degraded(
            f"dead-letter ratio {100 * ratio:.1f}% > max_dead_letter_ratio={self._max_ratio}: "
            f"step {step!r} {cls}"
        )
        if not self.tripped:
            self.tripped = True
            log.error(
                "dead-letter ratio %.1f%% over the last %.0fs exceeds max_dead_letter_ratio=%s: "
                "step %r fails most, with %s (%d of %d records; first %s); marking the bridge "
                "not ready (/readyz 503) until the ratio drops",
                100 * ratio,
                self._window_s,
                self._max_ratio,
                step,
                cls,
                worst.count,
                consumed,
                worst.first,
            )
