"""A Toxiproxy server between the bridge and each broker, driven through its HTTP API.

The server is built from the Go module proxy by ``tools/toxiproxy.sh`` (cached like helm). One
proxy per broker listens on the port that broker advertises on its ``PROXIED`` listener (see
``LocalKafka(proxy_ports=...)``), so a client bootstrapped through the proxies reaches every
broker only through them, while replication between brokers stays direct.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from devkit.kafka.cluster import die_with_parent, free_port
from tests.support.kafka import wait_until

REPO = Path(__file__).resolve().parents[2]


class Toxiproxy:
    """One ``toxiproxy-server`` process and its proxies (one per broker, named ``b<id>``)."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.api_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Toxiproxy:
        binary = subprocess.run(
            [str(REPO / "tools/toxiproxy.sh"), "--path"], check=True, capture_output=True, text=True
        ).stdout.strip()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [binary, "-host", "127.0.0.1", "-port", str(self.api_port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # no proxy outlives a killed test run
            )
        wait_until(self._answers, 30, f"toxiproxy API on port {self.api_port}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def _answers(self) -> bool:
        try:
            self._call("GET", "/version")
            return True
        except OSError:
            return False

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}", data=data, method=method
        )
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw.strip().startswith((b"{", b"[")) else raw.decode()

    def add_proxy(self, name: str, listen_port: int, upstream_port: int) -> None:
        self._call(
            "POST",
            "/proxies",
            {
                "name": name,
                "listen": f"127.0.0.1:{listen_port}",
                "upstream": f"127.0.0.1:{upstream_port}",
                "enabled": True,
            },
        )

    def set_upstream(self, name: str, upstream_port: int) -> None:
        """Point proxy ``name`` at another upstream port (its open connections are closed)."""
        self._call("POST", f"/proxies/{name}", {"upstream": f"127.0.0.1:{upstream_port}"})

    def add_toxic(
        self, proxy: str, kind: str, stream: str = "downstream", **attributes: int
    ) -> str:
        """Add a toxic of ``kind`` (latency, timeout, bandwidth, reset_peer...); its name."""
        name = f"{kind}_{stream}"
        self._call(
            "POST",
            f"/proxies/{proxy}/toxics",
            {"name": name, "type": kind, "stream": stream, "toxicity": 1.0,
             "attributes": attributes},
        )  # fmt: skip
        return name

    def heal(self) -> None:
        """Remove every toxic and re-enable every proxy."""
        self._call("POST", "/reset")


def toxic_everywhere(proxy: Toxiproxy, names: list[str], kind: str, **attributes: int) -> None:
    """The same toxic on both directions of every proxy in ``names``."""
    for name in names:
        for stream in ("downstream", "upstream"):
            proxy.add_toxic(name, kind, stream, **attributes)
