"""The project's one Maven fetcher: a pom's runtime jars, copied once into a cache directory.

Used by the Spark jobs (their Kafka-source and Delta jars, at run time), the local Kafka
launcher (the broker jars) and the bench (its Kafka Streams app). It lives in the wheel because
the Spark jobs need it there; the dev tools import it from here.

A cache directory is keyed by the hash of the pom, so a changed pom fetches anew and an
unchanged one never starts Maven. A manifest of jar names marks a finished fetch; concurrent
first runs each fetch into their own partial directory and the first to finish wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from spark_jobs.errors import EnvironmentProblem

_MANIFEST = ".complete"
_INSTALL = {
    "java": "install a Java 17+ runtime (Debian/Ubuntu: apt-get install -y "
    "openjdk-17-jre-headless) or set JAVA_HOME",
    "mvn": "install Maven, which fetches the jars from Maven Central on first use "
    "(Debian/Ubuntu: apt-get install -y maven)",
}


def cache_home() -> Path:
    """Root of everything the project caches (jars, dev cluster, tool binaries, base images)."""
    return Path(os.environ.get("EOS_BRIDGE_HOME", Path.home() / ".cache" / "eos-bridge"))


def require_tool(name: str, needed_by: str, alternative: str = "") -> str:
    """Path of ``java`` or ``mvn``, or an :class:`EnvironmentProblem` in one line.

    Args:
        name: ``"java"`` (``$JAVA_HOME/bin/java`` first) or ``"mvn"``.
        needed_by: who needs it, for the message ("the local Kafka broker").
        alternative: what else would do instead, appended to the message.
    """
    java_home = os.environ.get("JAVA_HOME")
    if name == "java" and java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which(name)
    if found is None:
        raise EnvironmentProblem(
            f"`{name}` was not found (needed by {needed_by}): {_INSTALL[name]}"
            + (f"; {alternative}" if alternative else "")
        )
    return found


def run_maven(mvn: str, args: list[str], what: str, cwd: Path | None = None) -> None:
    """Run ``mvn -q -B ARGS``; a failure raises :class:`EnvironmentProblem` with its output tail."""
    cmd = [mvn, "-q", "-B", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise EnvironmentProblem(f"{what} with Maven failed:\n{tail}")


def jars_dir(pom: Path, name: str) -> Path:
    """Where the jars of ``pom`` live once fetched: ``<cache home>/<name>-<pom hash>``."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_home() / f"{name}-{digest}"


def fetch_jars(pom: Path, name: str, needed_by: str, alternative: str = "") -> list[Path]:
    """Local paths of the runtime dependencies of ``pom``, fetched by Maven on first use.

    Args:
        pom: a ``pom.xml`` whose dependencies are the jars wanted.
        name: a readable prefix for the cache directory (see :func:`jars_dir`).
        needed_by: who needs them, for the message when Java or Maven is missing.
        alternative: what would do instead of installing the tool, for the same message.

    Raises:
        EnvironmentProblem: Java or Maven is missing, or Maven failed (its output tail).
    """
    dest = jars_dir(pom, name)
    done = _complete_jars(dest)
    if done is not None:
        return done
    require_tool("java", needed_by, alternative)
    mvn = require_tool("mvn", needed_by, alternative)
    partial = dest.with_name(f"{dest.name}.partial-{uuid.uuid4().hex[:8]}")
    partial.mkdir(parents=True)
    try:
        args = ["-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime"]
        run_maven(mvn, [*args, f"-DoutputDirectory={partial}"], f"fetching the jars of {pom}")
        names = sorted(p.name for p in partial.glob("*.jar"))
        (partial / _MANIFEST).write_text("\n".join(names) + "\n")
        # If another process finished first, its copy is as good as ours.
        with contextlib.suppress(OSError):
            partial.rename(dest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    done = _complete_jars(dest)
    if done is None:
        raise EnvironmentProblem(f"jar fetch into {dest} did not complete; remove it and retry")
    return done


def _complete_jars(directory: Path) -> list[Path] | None:
    """The jars named in the manifest, or None when the fetch never finished."""
    manifest = directory / _MANIFEST
    if not manifest.exists():
        return None
    jars = [directory / name for name in manifest.read_text().split()]
    return jars if jars and all(j.exists() for j in jars) else None
