"""A TCP proxy that understands Kafka's framing just enough to hold one request back.

Toxiproxy delays every byte of a connection alike, so a request it holds still reaches the
broker before the client's retry of it. This proxy holds one chosen request (by API key) on the
connection it came on, passes everything else, keeps that connection's broker side open when
the client gives up on it, and sends the request when the test says so: the broker then gets
the original *after* the retry, as a request stuck in a real network would arrive. The broker's
answer to it is kept (the client is gone by then).
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

from devkit.kafka.cluster import free_port

END_TXN = 26


@dataclass(slots=True)
class Held:
    """One held request: the broker side of its connection, its bytes, and the answer."""

    upstream: socket.socket
    frame: bytes
    api_version: int
    correlation_id: int
    answer: bytes | None = None
    answered: threading.Event = field(default_factory=threading.Event)

    def error_code(self) -> int:
        """The answer's error code (EndTxn: throttle time, then the error code)."""
        assert self.answer is not None
        body = self.answer[4:]  # after the correlation id
        if self.api_version >= 3:  # flexible versions: a tagged-field count in the header
            body = body[1:]
        return int(struct.unpack(">h", body[4:6])[0])


class HoldProxy:
    """Listens on a free loopback port and relays to ``upstream_port``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._armed: int | None = None
        self._lock = threading.Lock()
        self.held: list[Held] = []
        self._sockets: list[socket.socket] = []  # every connection's two ends, closed at close()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="holdproxy").start()

    def arm(self, api_key: int) -> None:
        """Hold the next request with ``api_key`` (once)."""
        with self._lock:
            self._armed = api_key

    def release(self) -> None:
        """Send every held request to the broker on its own connection."""
        with self._lock:
            held, self._armed = list(self.held), None
        for h in held:
            h.upstream.sendall(h.frame)

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self._lock:
                self._sockets += [client, upstream]
            waiting: dict[int, Held] = {}
            threading.Thread(target=self._up, args=(client, upstream, waiting), daemon=True).start()
            threading.Thread(
                target=self._down, args=(upstream, client, waiting), daemon=True
            ).start()

    def _up(self, client: socket.socket, upstream: socket.socket, waiting: dict[int, Held]) -> None:
        """Client to broker, frame by frame; the armed request is held, not sent."""
        try:
            while (frame := _frame(client)) is not None:
                api_key, version, correlation = struct.unpack(">hhi", frame[4:12])
                with self._lock:
                    hold = self._armed == api_key
                    if hold:
                        self._armed = None
                        h = Held(upstream, frame, version, correlation)
                        self.held.append(h)
                        waiting[correlation] = h
                if not hold:
                    upstream.sendall(frame)
        except OSError:
            pass  # the client gave up on this connection: its broker side stays open

    def _down(
        self, upstream: socket.socket, client: socket.socket, waiting: dict[int, Held]
    ) -> None:
        """Broker to client, frame by frame; the answer to a held request is kept."""
        alive = True
        try:
            while (frame := _frame(upstream)) is not None:
                (correlation,) = struct.unpack(">i", frame[4:8])
                h = waiting.pop(correlation, None)
                if h is not None:
                    h.answer = frame[4:]
                    h.answered.set()
                if alive:
                    try:
                        client.sendall(frame)
                    except OSError:
                        alive = False
        except OSError:
            pass


def _frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed Kafka frame (size included), or None at the end of the stream."""
    head = _exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _exactly(sock, size)
    return None if body is None else head + body


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
