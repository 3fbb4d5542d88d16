"""HTTP endpoints: ``/metrics`` (Prometheus), ``/livez`` (loop alive) and ``/readyz``."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.ops.metrics import Metrics


class Health:
    """Liveness = the loop beat recently; readiness = assigned and recovered, and not degraded
    (too many dead letters, :mod:`app.sink.deadletters`)."""

    def __init__(self, stale_after: float) -> None:
        self._stale_after = stale_after
        self._beat = time.monotonic()
        self.ready = False
        self.reason = "starting"
        self.degraded: str | None = None
        self.stuck: str | None = None

    @property
    def stale_after(self) -> float:
        return self._stale_after

    def beat(self) -> None:
        self._beat = time.monotonic()
        self.stuck = None

    def alive(self) -> bool:
        return self.stuck is None and time.monotonic() - self._beat < self._stale_after

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
                ok = health.alive()
                stalled = f"loop stalled: {health.stuck or 'no beat'}\n".encode()
                self._send(200 if ok else 503, b"ok\n" if ok else stalled)
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
