"""HTTP endpoints: ``/metrics`` (Prometheus), ``/livez`` (loop alive) and ``/readyz``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.ops.metrics import Metrics


class Health:
    """Liveness = the loop beat recently and, while input waits, committed a checkpoint within
    ``commit_bound`` (an abort loop beats but is not alive); readiness = assigned and
    recovered, and not degraded (too many dead letters, :mod:`app.sink.deadletters`).

    Args:
        stale_after: seconds without a beat of the loop that fail ``/livez``.
        commit_bound: seconds since the first record consumed after the last commit that fail
            ``/livez`` while the committed lag is above 0 (default: ``stale_after``).
        clock: monotonic seconds (a fake in unit tests).
    """

    def __init__(
        self,
        stale_after: float,
        commit_bound: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stale_after = stale_after
        self._commit_bound = commit_bound or stale_after
        self._clock = clock
        self._beat = clock()
        self._uncommitted_since: float | None = None  # first record consumed since a commit
        self._waiting = False  # committed lag above 0 at the last lag update
        self.ready = False
        self.reason = "starting"
        self.degraded: str | None = None
        self.stuck: str | None = None

    @property
    def stale_after(self) -> float:
        return self._stale_after

    def beat(self) -> None:
        self._beat = self._clock()
        self.stuck = None

    def consumed(self) -> None:
        """The loop took records into the open transaction (kept across aborts: they are
        consumed again, never committed)."""
        if self._uncommitted_since is None:
            self._uncommitted_since = self._clock()

    def committed(self, records: int = 0) -> None:
        """A checkpoint committed (``records`` input records)."""
        del records
        self._uncommitted_since = None

    def waiting(self, records: int) -> None:
        """The committed lag (records behind the high watermarks) at the last lag update."""
        self._waiting = records > 0

    def alive(self) -> bool:
        return self.liveness()[0]

    def liveness(self) -> tuple[bool, str]:
        """What ``/livez`` answers: alive or not, and why not."""
        now = self._clock()
        if self.stuck is not None:
            return False, f"loop stalled: {self.stuck}"
        if now - self._beat >= self._stale_after:
            return False, "loop stalled: no beat"
        since = self._uncommitted_since
        if self._waiting and since is not None and now - since > self._commit_bound:
            return False, f"no checkpoint committed for {now - since:.0f}s while input waits"
        return True, "ok"

    def fail(self, what: str) -> None:
        """The watchdog saw ``what`` overrun: ``/livez`` fails (naming it) until the next beat."""
        self.stuck = what

    def set_ready(self, ready: bool, reason: str) -> None:
        self.ready, self.reason = ready, reason

    def set_degraded(self, reason: str | None) -> None:
        """Running but unhealthy (``reason``), or healthy again (None): overrides readiness."""
        self.degraded = reason

    def readiness(self) -> tuple[bool, str]:
        """What ``/readyz`` answers: ready or not, and why."""
        if self.degraded is not None:
            return False, self.degraded
        return self.ready, self.reason


def serve(host: str, port: int, health: Health, metrics: Metrics) -> ThreadingHTTPServer:
    """Start the endpoints on a daemon thread; returns the server (``shutdown()`` to stop)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path == "/livez":
                ok, why = health.liveness()
                self._send(200 if ok else 503, f"{why}\n".encode())
            elif self.path == "/readyz":
                ready, reason = health.readiness()
                self._send(200 if ready else 503, f"{reason}\n".encode())
            else:
                self._send(404, b"not found\n")

        def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds would flood the log

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
