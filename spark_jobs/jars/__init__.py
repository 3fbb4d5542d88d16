"""The Kafka-source and Delta jars, fetched from Maven Central once and reused.

The jars listed by ``pom.xml`` (next to this file) are copied by Maven into
``$EOS_BRIDGE_HOME/spark-jars-<hash of the pom>`` (default home: ``~/.cache/eos-bridge``), so a
changed pom fetches anew and an unchanged one never starts Maven. Spark gets them as local
paths through ``spark.jars``; nothing is resolved with Ivy at run time. An image that bakes the
jars in sets ``EOS_SPARK_JARS_DIR`` and needs neither Maven nor the network.
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

POM = Path(__file__).with_name("pom.xml")
JARS_DIR_ENV = "EOS_SPARK_JARS_DIR"
_MANIFEST = ".complete"


def cache_home() -> Path:
    """Root of everything the project caches (shared with the local Kafka launcher)."""
    return Path(os.environ.get("EOS_BRIDGE_HOME", Path.home() / ".cache" / "eos-bridge"))


def jars_dir(pom: Path = POM) -> Path:
    """Where the jars of ``pom`` live once fetched."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_home() / f"spark-jars-{digest}"


def ensure_jars(pom: Path = POM) -> list[Path]:
    """Local paths of every jar Spark needs on top of pyspark, fetching them on first use.

    Raises:
        EnvironmentProblem: Java or Maven is missing, or Maven failed (its output tail is
            included), or ``EOS_SPARK_JARS_DIR`` holds no jars.
    """
    override = os.environ.get(JARS_DIR_ENV)
    if override:
        jars = sorted(Path(override).glob("*.jar"))
        if not jars:
            raise EnvironmentProblem(f"{JARS_DIR_ENV}={override} holds no *.jar files")
        return jars
    dest = jars_dir(pom)
    done = _complete_jars(dest)
    if done is not None:
        return done
    _require_tool("java", "a Java 17+ runtime (Debian/Ubuntu: apt-get install -y openjdk-17-jdk)")
    mvn = _require_tool("mvn", "Maven (Debian/Ubuntu: apt-get install -y maven)")
    partial = dest.with_name(f"{dest.name}.partial-{uuid.uuid4().hex[:8]}")
    partial.mkdir(parents=True)
    try:
        _copy_dependencies(mvn, pom, partial)
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


def _require_tool(name: str, install_hint: str) -> str:
    if name == "java":
        java_home = os.environ.get("JAVA_HOME")
        if java_home and (Path(java_home) / "bin" / "java").exists():
            return str(Path(java_home) / "bin" / "java")
    found = shutil.which(name)
    if found is None:
        raise EnvironmentProblem(
            f"`{name}` was not found: the Spark jobs need {install_hint}, "
            f"or set {JARS_DIR_ENV} to a directory that already holds the jars."
        )
    return found


def _copy_dependencies(mvn: str, pom: Path, into: Path) -> None:
    cmd = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={into}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        raise EnvironmentProblem(f"fetching the Spark jars with Maven ({pom}) failed:\n{tail}")
