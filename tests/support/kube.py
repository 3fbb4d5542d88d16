"""A local stand-in for the Kubernetes API (plain HTTP): answers every GET with ``status`` and
``body`` and records the path and Authorization header of each request."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeKubernetesApi:
    def __init__(self) -> None:
        self.status = 200
        self.body: object = {"spec": {"replicas": 2}, "metadata": {"name": "eos-bridge"}}
        self.requests: list[tuple[str, str | None]] = []
        self.url = ""


@contextmanager
def fake_kubernetes_api() -> Iterator[FakeKubernetesApi]:
    state = FakeKubernetesApi()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append((self.path, self.headers.get("Authorization")))
            data = json.dumps(state.body).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
