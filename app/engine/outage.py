"""Waiting out a Schema Registry outage: the ladder's reaction to ``RegistryUnavailable``.

The registry being down is never a record's fault, so nothing is dead-lettered: the ladder
aborts and rewinds, then this waits (``/readyz`` false, ``/livez`` beating) until the registry
answers a probe, and the loop replays the batch. An outage longer than the deadline is
fatal (exit 3) with one line naming the registry, like any call stuck past its deadline.
Failures that come back within a deadline of the last recovery count as the same outage, so
a registry that answers the probe but fails the real request cannot keep the bridge looping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from app.errors import KafkaFatalError
from app.ops.health import Health
from app.serde.registry_settings import RegistryUnavailable

log = logging.getLogger(__name__)


class Probe(Protocol):
    """The one seam: returns when the registry answers, raises ``RegistryUnavailable`` if not."""

    def check(self) -> None: ...


class RegistryOutage:
    """Waits until the registry answers, within ``deadline`` seconds per outage.

    Args:
        probe: asks the registry.
        health: ``/readyz`` is false while the outage lasts; the loop's beat is kept.
        deadline: seconds an outage may last (``call_timeout``).
        clock, sleep: time, for the unit tests.
        backoff: first and longest pause between probes, seconds.
    """

    def __init__(
        self,
        probe: Probe,
        health: Health,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        backoff: tuple[float, float] = (0.25, 2.0),
    ) -> None:
        self._probe, self._health, self._deadline = probe, health, deadline
        self._clock, self._sleep, self._backoff = clock, sleep, backoff
        self._since: float | None = None  # when the current outage began
        self._ended = float("-inf")  # when the registry last answered again
        self._stopping: Callable[[], bool] = lambda: False

    def stop_when(self, stopping: Callable[[], bool]) -> None:
        """Stop waiting once ``stopping()`` holds (SIGTERM: the loop then shuts down; nothing
        is open, the abort came first)."""
        self._stopping = stopping

    def wait(self, exc: RegistryUnavailable) -> None:
        """Return once the registry answers; the caller has aborted and rewound.

        Raises:
            KafkaFatalError: the outage has lasted longer than the deadline.
        """
        now = self._clock()
        if self._since is None or now - self._ended > self._deadline:
            self._since = now
        before = self._health.ready, self._health.reason
        self._health.set_ready(False, f"schema registry unavailable: {exc}")
        log.warning("%s: nothing is dead-lettered; retrying until it answers", exc)
        pause = self._backoff[0]
        while True:
            if self._clock() - self._since > self._deadline:
                raise KafkaFatalError(
                    f"{exc}; unavailable for more than {self._deadline:.0f}s (call_timeout): "
                    f"exiting so Kubernetes restarts the instance"
                ) from exc
            if self._stopping():
                return
            try:
                self._probe.check()
                break
            except RegistryUnavailable as again:
                exc = again
            self._health.beat()
            self._sleep(pause)
            pause = min(pause * 2, self._backoff[1])
        self._ended = self._clock()
        self._health.set_ready(*before)
        log.info("schema registry answers again: replaying from the committed offsets")
