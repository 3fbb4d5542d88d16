"""The dev Schema Registry's build: Apicurio Registry as a Quarkus fast-jar, made by Maven once.

``pom.xml`` and ``application.properties`` next to this file are copied into a build directory
and ``mvn -q -B package`` runs there; the result (``quarkus-app/``) is kept in
``$EOS_BRIDGE_HOME/registry/apicurio-<hash of both files>``, so a second start runs no Maven
and a changed pom builds anew. Like :func:`spark_jobs.maven.fetch_jars`: concurrent first
builds each work in a partial directory of their own, and the first to finish wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import uuid
from pathlib import Path

from spark_jobs.errors import EnvironmentProblem
from spark_jobs.maven import cache_home, require_tool, run_maven

HERE = Path(__file__).parent
POM = HERE / "pom.xml"
PROPERTIES = HERE / "application.properties"
NEEDED_BY = "the local Schema Registry"
_RUN_JAR = Path("quarkus-app") / "quarkus-run.jar"
# The registry's own application.properties asks for a legacy jar in the prod profile; a
# system property is the one setting that outranks it.
MAVEN_ARGS = ("package", "-DskipTests", "-D%prod.quarkus.package.type=fast-jar")
_MANIFEST = ".complete"

__all__ = ["EnvironmentProblem", "app_dir", "ensure_registry_app", "require_java"]


def require_java() -> str:
    """Path of the ``java`` binary, or a clear :class:`EnvironmentProblem`."""
    return require_tool("java", NEEDED_BY)


def app_dir(pom: Path = POM, properties: Path = PROPERTIES) -> Path:
    """Where the built registry lives: ``<cache home>/registry/apicurio-<hash>``."""
    key = b"\0".join([pom.read_bytes(), properties.read_bytes(), *map(str.encode, MAVEN_ARGS)])
    digest = hashlib.sha256(key).hexdigest()[:12]
    return cache_home() / "registry" / f"apicurio-{digest}"


def ensure_registry_app(pom: Path = POM, properties: Path = PROPERTIES) -> Path:
    """Path of ``quarkus-run.jar``, built by Maven on first use.

    Raises:
        EnvironmentProblem: Java or Maven is missing, or the build failed (its output tail).
    """
    dest = app_dir(pom, properties)
    if (dest / _MANIFEST).exists() and (dest / _RUN_JAR).exists():
        return dest / _RUN_JAR
    require_tool("java", NEEDED_BY)
    mvn = require_tool("mvn", NEEDED_BY)
    partial = dest.with_name(f"{dest.name}.partial-{uuid.uuid4().hex[:8]}")
    resources = partial / "src" / "main" / "resources"
    resources.mkdir(parents=True)
    try:
        shutil.copyfile(pom, partial / "pom.xml")
        shutil.copyfile(properties, resources / "application.properties")
        run_maven(mvn, list(MAVEN_ARGS), f"building {pom}", cwd=partial)
        built = partial / "target" / _RUN_JAR
        if not built.exists():
            raise EnvironmentProblem(f"the registry build made no {_RUN_JAR} in {partial}")
        # Keep the runnable app only; sources and class files would be dead weight.
        kept = partial.with_name(f"{partial.name}-app")
        kept.mkdir()
        shutil.move(str(partial / "target" / "quarkus-app"), kept / "quarkus-app")
        (kept / _MANIFEST).write_text(f"{pom.name}\n{properties.name}\n")
        with contextlib.suppress(OSError):  # another build finished first: as good as ours
            kept.rename(dest)
        shutil.rmtree(kept, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if not (dest / _RUN_JAR).exists():
        raise EnvironmentProblem(f"registry build into {dest} did not complete; remove it, retry")
    return dest / _RUN_JAR
