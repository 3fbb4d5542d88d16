"""Start and stop a real Apicurio Registry (Confluent-compatible API) on loopback.

One JVM (``java -Xmx256m -jar quarkus-run.jar``) with in-memory storage: every start is an
empty registry. Readiness is asked of the registry (``/health/ready``), never slept for.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path
from typing import Any

from devkit.kafka.cluster import die_with_parent, free_port
from devkit.kafka.security import DevSecurity
from devkit.registry.build import ensure_registry_app, require_java

_STATE_FILE = "registry.json"
_LOG = "registry.log"
_CCOMPAT = "/apis/ccompat/v7"
# A system property that names the directory, so a recorded pid is recognised as ours.
_MARKER = "-Deosbridge.registry.dir="


class LocalRegistryError(RuntimeError):
    """The local registry failed to start or stop; the message carries its last log lines."""


class LocalRegistry:
    """One Apicurio Registry process living under ``directory``.

    Args:
        directory: where its log and state file go.
        port: HTTP port on 127.0.0.1; None picks a free one.
        tied_to_parent: the registry dies with this Python process (tests); False for the
            long-lived registry of ``python -m devkit.registry``.
        heap: JVM max heap.
        secure: serve HTTPS only, with a certificate for 127.0.0.1 signed by a dev CA made at
            start (``ca``; the same key material as the secure dev broker's).
    """

    def __init__(
        self,
        directory: Path,
        port: int | None = None,
        *,
        tied_to_parent: bool = True,
        heap: str = "256m",
        secure: bool = False,
    ) -> None:
        self.directory = directory
        self.security = DevSecurity(directory / "security") if secure else None
        self.tied_to_parent = tied_to_parent
        self.heap = heap
        self._fixed_port = port
        self.port = port or free_port()
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        """``http(s)://127.0.0.1:PORT``: health and Apicurio's own API live under it."""
        return f"{'https' if self.security else 'http'}://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path | None:
        """The CA that signed a secure registry's certificate (the clients' ``ca_location``)."""
        return self.security.ca if self.security else None

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what ``schema.registry.url`` clients are given."""
        return f"{self.base}{_CCOMPAT}"

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = 120.0, attempts: int = 3) -> LocalRegistry:
        """Build the app if needed, start it and wait until it is ready.

        When another process took the picked port in between, the start is retried on a new
        free port (only when no port was given), up to ``attempts`` times."""
        jar = ensure_registry_app()
        java = require_java()
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.security is not None:
            self.security.make_certificates()
        for attempt in range(1, attempts + 1):
            self._launch(java, jar)
            try:
                self.wait_ready(timeout)
                return self
            except LocalRegistryError as exc:
                self.stop()
                if attempt == attempts or self._fixed_port or not _port_clash(str(exc)):
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the registry, SIGKILL it after ``timeout``; idempotent."""
        if self.pid is not None and self.alive():
            with suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        self._reap(timeout)
        (self.directory / _STATE_FILE).unlink(missing_ok=True)

    def alive(self) -> bool:
        """The registry process is running (a recorded pid is checked to be ours)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _pid_runs_in(self.pid, self.directory)

    def __enter__(self) -> LocalRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- readiness and settings ------------------------------------------------------------

    def ready(self) -> bool:
        """``/health/ready`` answers 200 right now."""
        try:
            with self._open(f"{self.base}/health/ready", timeout=2) as response:
                return int(response.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Block until the registry answers ready; fail with its log if it dies or overruns."""
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.alive():
                raise LocalRegistryError(f"the registry exited during start-up\n{self.logs()}")
            if time.monotonic() > deadline:
                raise LocalRegistryError(f"registry not ready after {timeout:.0f}s\n{self.logs()}")
            time.sleep(0.2)

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        """``PUT /config`` (or ``/config/<subject>``): the compatibility level, e.g. BACKWARD."""
        path = f"/config/{subject}" if subject else "/config"
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps({"compatibility": level}).encode(),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            method="PUT",
        )
        with self._open(request, timeout=10) as response:
            if int(response.status) != 200:
                raise LocalRegistryError(f"PUT {path} answered {response.status}")

    def logs(self, lines: int = 30) -> str:
        """The last lines of the registry's log."""
        path = self.directory / _LOG
        if not path.exists():
            return f"(no {_LOG})"
        tail = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return f"--- registry {_LOG} ---\n{tail}"

    # ---- internals -------------------------------------------------------------------------

    def _open(self, request: str | urllib.request.Request, timeout: float) -> Any:
        context = ssl.create_default_context(cafile=self.ca) if self.security else None
        return urllib.request.urlopen(request, timeout=timeout, context=context)

    def _listener(self) -> list[str]:
        if self.security is None:
            return [f"-Dquarkus.http.port={self.port}"]
        tls = self.security.directory
        return [
            f"-Dquarkus.http.ssl-port={self.port}", "-Dquarkus.http.port=0",
            "-Dquarkus.http.insecure-requests=disabled",
            f"-Dquarkus.http.ssl.certificate.files={tls / 'broker.pem'}",
            f"-Dquarkus.http.ssl.certificate.key-files={tls / 'broker.key'}",
        ]  # fmt: skip

    def _launch(self, java: str, jar: Path) -> None:
        cmd = [
            java, f"-Xmx{self.heap}", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"{_MARKER}{self.directory}", "-Dquarkus.http.host=127.0.0.1", *self._listener(),
            "-jar", str(jar),
        ]  # fmt: skip
        with open(self.directory / _LOG, "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.directory,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=not self.tied_to_parent,
                preexec_fn=die_with_parent if self.tied_to_parent else None,
            )
        self.pid = self._proc.pid
        state = {"pid": self.pid, "port": self.port, "url": self.url, "secure": bool(self.security)}
        (self.directory / _STATE_FILE).write_text(json.dumps(state, indent=2))

    def _reap(self, timeout: float) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        elif self.pid is not None:
            deadline = time.monotonic() + timeout
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.alive():
                with suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            while self.alive():
                time.sleep(0.05)
        self._proc = None
        self.pid = None

    @classmethod
    def attach(cls, directory: Path) -> LocalRegistry | None:
        """The registry recorded in ``directory`` (started by another process), if any."""
        path = directory / _STATE_FILE
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        registry = cls(
            directory, int(state["port"]), tied_to_parent=False, secure=bool(state.get("secure"))
        )
        registry.pid = int(state["pid"])
        return registry


def _pid_runs_in(pid: int, directory: Path) -> bool:
    """True when ``pid`` is a live registry started for ``directory`` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return f"{_MARKER}{directory}".encode() in cmdline


def _port_clash(error: str) -> bool:
    """The registry died at start-up because its port was taken."""
    return "Port already bound" in error or "Address already in use" in error
