"""A thread that bounds what the main thread may not hang in: client calls, steps, shutdown.

librdkafka does not always honour its own timeouts (``send_offsets_to_transaction`` blocks
forever when the transaction coordinator dies: confluentinc/librdkafka#5456, #5511), and a
stuck C call also keeps Python's SIGTERM handler from running. So the bridge bounds every
blocking call itself: on overrun the watchdog logs one line naming the call, where it was
going and the deadline, fails ``/livez``, flushes the logs and ends the process with exit 3.
Kubernetes restarts the pod and its ``init_transactions`` fences the stuck producer's epoch, so
nothing the stuck transaction wrote ever becomes visible (re-creating the clients in-process
is not safe here: the stuck thread still owns the old client and cannot be stopped).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from app.ops.health import Health

log = logging.getLogger(__name__)

EXIT_STUCK = 3


@dataclass(slots=True)
class _Watch:
    what: str
    where: str
    started: float
    deadline: float
    consequence: str
    reported_stale: bool = False


def _exit_now(code: int) -> None:
    logging.shutdown()  # flush every handler: the last line is the one that matters
    os._exit(code)


class Watchdog:
    """Deadlines for the main thread's blocking work, enforced from a daemon thread.

    Args:
        health: ``/livez`` fails when a deadline is missed or work is stale.
        stale_after: seconds after which a guarded activity is reported by name (once) as the
            reason ``/livez`` fails, before its hard deadline.
        on_overrun: what ends the process (tests pass a recorder); default ``os._exit``.
        tick: how often the thread looks.
    """

    def __init__(
        self,
        health: Health,
        stale_after: float = 30.0,
        on_overrun: Callable[[int], None] = _exit_now,
        tick: float = 0.2,
    ) -> None:
        self._health = health
        self._stale_after = stale_after
        self._on_overrun = on_overrun
        self._tick = tick
        self._lock = threading.Lock()
        self._watches: dict[int, _Watch] = {}
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signals: socket.socket | None = None  # read end of the C-level signal wake-up
        self._writer: socket.socket | None = None
        self._shutdown_timeout: float | None = None

    def start(self) -> Watchdog:
        self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    @contextmanager
    def guard(
        self, what: str, seconds: float, where: str = "", consequence: str = ""
    ) -> Iterator[None]:
        """Bound the block to ``seconds``; on overrun the process ends (exit 3).

        Args:
            what: the call or step, e.g. ``send_offsets_to_transaction``.
            seconds: the deadline, from now.
            where: the broker, coordinator or topic it talks to, if known.
            consequence: why the deadline matters, for the log line.
        """
        token = next(self._ids)
        now = time.monotonic()
        watch = _Watch(what, where, now, now + seconds, consequence)
        with self._lock:
            self._watches[token] = watch
        try:
            yield
        finally:
            with self._lock:
                del self._watches[token]

    def busy(self) -> list[str]:
        """What the main thread is inside now (guarded calls and steps), oldest first."""
        with self._lock:
            return [w.what for w in self._watches.values()]

    def exit_within(self, seconds: float, why: str) -> None:
        """Arm a deadline for the whole process (SIGTERM: ``shutdown_timeout``)."""
        now = time.monotonic()
        with self._lock:
            self._watches[-1] = _Watch("shutdown", "", now, now + seconds, why)

    def watch_signals(self, shutdown_timeout: float) -> None:
        """Learn of SIGTERM/SIGINT at the C level (the Python handler cannot run while the
        main thread is stuck in librdkafka) and then give the process ``shutdown_timeout``.

        Must be called from the main thread, after the Python handlers are installed.
        """
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._signals, self._writer = reader, writer
        self._shutdown_timeout = shutdown_timeout
        reader.settimeout(0)

    def _run(self) -> None:
        while not self._stop.wait(self._tick):
            self._check_signals()
            now = time.monotonic()
            with self._lock:
                watches = list(self._watches.values())
            for watch in watches:
                if now >= watch.deadline:
                    self._overrun(watch, now)
                    return
                if not watch.reported_stale and now - watch.started >= self._stale_after:
                    watch.reported_stale = True
                    self._health.fail(f"{watch.what} running for {now - watch.started:.0f}s")
                    log.error(
                        "%s has been running for %.0fs%s; /livez fails until it returns",
                        watch.what,
                        now - watch.started,
                        _at(watch.where),
                    )

    def _check_signals(self) -> None:
        if self._signals is None or self._shutdown_timeout is None:
            return
        try:
            got = self._signals.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        if got and -1 not in self._watches:
            self.exit_within(
                self._shutdown_timeout,
                f"SIGTERM not honoured within shutdown_timeout={self._shutdown_timeout:.0f}s",
            )

    def _overrun(self, watch: _Watch, now: float) -> None:
        busy = [what for what in self.busy() if what != watch.what]
        self._health.fail(f"{watch.what} stuck")
        if watch.what == "shutdown":
            log.critical(
                "%s (still in: %s); exiting with code %d",
                watch.consequence,
                ", ".join(busy) or "the loop",
                EXIT_STUCK,
            )
        else:
            log.critical(
                "%s did not return within its deadline of %.0fs%s%s; exiting with code %d so "
                "the restarted instance fences this one (init_transactions)",
                watch.what,
                watch.deadline - watch.started,
                _at(watch.where),
                f": {watch.consequence}" if watch.consequence else "",
                EXIT_STUCK,
            )
        log.critical("thread stacks at the overrun:\n%s", _stacks())
        self._on_overrun(EXIT_STUCK)


def _stacks() -> str:
    """Every thread's Python stack, so a report names the stuck librdkafka call and its caller."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        parts.append(f"Thread {names.get(ident, '?')} ({ident}):\n{stack}")
    return "\n".join(parts)


def _at(where: str) -> str:
    return f" (talking to {where})" if where else ""
