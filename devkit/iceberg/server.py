"""Start and stop a real Apache Iceberg REST catalog on loopback.

The server is Apache Iceberg's own REST catalog fixture (``RESTCatalogServer`` from
``org.apache.iceberg:iceberg-open-api``, classifier ``test-fixtures``), fetched from Maven
Central with the project's one fetcher (:func:`spark_jobs.maven.fetch_jars`). Behind it, a JDBC
catalog on a SQLite file and a warehouse directory, both under ``directory``; so a restarted
server keeps its tables. Readiness is asked of the server (``GET /v1/config``), never slept for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path

from devkit.kafka.cluster import die_with_parent, free_port
from spark_jobs.maven import fetch_jars, require_tool

_POM = Path(__file__).with_name("pom.xml")
_LOG = "catalog.log"
_MAIN = "org.apache.iceberg.rest.RESTCatalogServer"


class LocalCatalogError(RuntimeError):
    """The local catalog failed to start; the message carries its last log lines."""


class LocalRestCatalog:
    """One REST catalog process living under ``directory`` (its log, database, warehouse).

    Args:
        directory: where its log, its SQLite catalog and its warehouse go.
        port: HTTP port; None picks a free one.
        tied_to_parent: the server dies with this Python process (tests).
    """

    def __init__(
        self, directory: Path, port: int | None = None, *, tied_to_parent: bool = True
    ) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.tied_to_parent = tied_to_parent
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """What a REST client is given (pyiceberg's ``uri``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> Path:
        return self.directory / "warehouse"

    def start(self, timeout: float = 120.0) -> LocalRestCatalog:
        """Fetch the jars if needed, start the server and wait until it answers."""
        jars = fetch_jars(_POM, "iceberg-rest-jars", "the local Iceberg REST catalog")
        java = require_tool("java", "the local Iceberg REST catalog")
        self.warehouse.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            # RESTCatalogServer reads CATALOG_* as catalog properties ("__" is "-", "_" is ".").
            "CATALOG_REST_PORT": str(self.port),
            "CATALOG_WAREHOUSE": f"file://{self.warehouse}",
            "CATALOG_URI": f"jdbc:sqlite:file:{self.directory / 'catalog.db'}",
            "CATALOG_JDBC_USER": "user",
            "CATALOG_JDBC_PASSWORD": "password",
        }
        classpath = os.pathsep.join(str(j) for j in jars)
        cmd = [java, "-Xmx256m", "-XX:+ExitOnOutOfMemoryError", "-cp", classpath, _MAIN]
        with open(self.directory / _LOG, "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                cwd=self.directory,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=not self.tied_to_parent,
                preexec_fn=die_with_parent if self.tied_to_parent else None,
            )
        self._wait_ready(timeout)
        return self

    def ready(self) -> bool:
        """``GET /v1/config`` answers 200 right now."""
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as response:
                return int(response.status) == 200
        except (OSError, urllib.error.URLError):
            return False

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self._proc is not None and self._proc.poll() is not None:
                self.stop()
                raise LocalCatalogError(f"the catalog exited during start-up\n{self.logs()}")
            if time.monotonic() > deadline:
                self.stop()
                raise LocalCatalogError(f"catalog not ready after {timeout:.0f}s\n{self.logs()}")
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server, SIGKILL it after ``timeout``; idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def logs(self, lines: int = 30) -> str:
        path = self.directory / _LOG
        if not path.exists():
            return f"(no {_LOG})"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> LocalRestCatalog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
