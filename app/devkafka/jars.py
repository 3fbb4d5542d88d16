"""Fetch jars from Maven Central into a cache directory, once.

A cache directory is keyed by the hash of the pom, so changing a version fetches anew and a
second run with the same pom does not start Maven at all.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
_DONE_MARKER = ".complete"


class EnvironmentProblem(RuntimeError):
    """A tool the local Kafka needs is missing; the message says what to install."""


def cache_home() -> Path:
    """Root of everything the project caches (jars, dev cluster, base images)."""
    return Path(os.environ.get("EOS_BRIDGE_HOME", Path.home() / ".cache" / "eos-bridge"))


def require_java() -> str:
    """Path of the ``java`` binary, or a clear :class:`EnvironmentProblem`."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise EnvironmentProblem(
            "Java was not found: the local Kafka broker needs a Java 17+ runtime. "
            "Install one (Debian/Ubuntu: `apt-get install -y openjdk-17-jre-headless`) "
            "or set JAVA_HOME."
        )
    return found


def require_maven() -> str:
    """Path of the ``mvn`` binary, or a clear :class:`EnvironmentProblem`."""
    found = shutil.which("mvn")
    if found is None:
        raise EnvironmentProblem(
            "Maven was not found: it fetches the Kafka jars from Maven Central on first use. "
            "Install it (Debian/Ubuntu: `apt-get install -y maven`) and run the command again."
        )
    return found


def fetch_maven_jars(pom: Path, name: str) -> Path:
    """Copy the runtime dependencies of ``pom`` into a cache directory and return it.

    Args:
        pom: a ``pom.xml`` whose dependencies are the jars wanted.
        name: a readable prefix for the cache directory.

    Raises:
        EnvironmentProblem: Maven is missing or the fetch failed (its output tail is included).
    """
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    dest = cache_home() / f"{name}-{digest}"
    if (dest / _DONE_MARKER).exists():
        return dest
    mvn = require_maven()
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={tmp}", "-DincludeScope=runtime",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise EnvironmentProblem(f"Fetching jars for {pom} with Maven failed:\n{tail}")
    (tmp / _DONE_MARKER).write_text(digest)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def ensure_kafka_jars() -> Path:
    """Directory holding the Kafka broker jars (fetched on first use)."""
    require_java()
    return fetch_maven_jars(POM, "kafka-jars")
