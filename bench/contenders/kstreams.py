"""The Kafka Streams contender: bench/kstreams (a small Java app), built once by Maven.

``mvn -q -B package`` runs on a copy of ``bench/kstreams`` (pom + sources) from the code under
test; the jar and its runtime dependencies land in ``~/.cache/eos-bridge/kstreams-bench-<hash>``
keyed by the pom and the sources, so later runs start no Maven at all (like the broker jars, see
:mod:`spark_jobs.maven`). Maven resolves from Maven Central into ``~/.m2`` on the first build.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.contenders import Job
from spark_jobs.maven import cache_home, require_tool, run_maven

MAIN_CLASS = "io.eosbridge.bench.StreamsBench"
JAR = "kstreams-bench.jar"
WARMUP_RECORDS = 500_000  # JIT-warm runs: this many input records (at most the input) first
_DONE_MARKER = ".complete"
NEEDED_BY = "the Kafka Streams contender of the bench"


@dataclass(slots=True, frozen=True)
class Variant:
    """How a contender key configures the app."""

    cache_max_bytes: int | None  # statestore.cache.max.bytes; None = Kafka Streams' default
    warmup_records: int


VARIANTS = {
    "kstreams-eos": Variant(None, 0),
    "kstreams-eos-c0": Variant(0, 0),
    "kstreams-eos-warm": Variant(None, WARMUP_RECORDS),
    "kstreams-eos-c0-warm": Variant(0, WARMUP_RECORDS),
}


def project_digest(project: Path) -> str:
    """Hash of the pom and every source file (names and bytes): the build cache key."""
    h = hashlib.sha256()
    files = [project / "pom.xml", *sorted((project / "src").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(project)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def build(project: Path) -> Path:
    """Directory with the app jar and ``lib/`` (its dependencies), built on first use.

    Raises:
        EnvironmentProblem: Java or Maven is missing, or the build failed (its output tail).
    """
    dest = cache_home() / f"kstreams-bench-{project_digest(project)}"
    if (dest / _DONE_MARKER).exists():
        return dest
    require_java()
    mvn = require_maven()
    work = dest.with_name(dest.name + ".build")
    shutil.rmtree(work, ignore_errors=True)
    # Build on a copy: Maven's target/ must not appear in the source tree (or the snapshot).
    shutil.copytree(project, work, ignore=shutil.ignore_patterns("target"))
    run_maven(mvn, ["package"], f"building {project}", cwd=work)
    shutil.rmtree(dest, ignore_errors=True)
    (work / "target").rename(dest)
    (dest / _DONE_MARKER).write_text("ok")
    shutil.rmtree(work, ignore_errors=True)
    return dest


def require_java() -> str:
    """Path of ``java``, or an ``EnvironmentProblem`` naming what to install."""
    return require_tool("java", NEEDED_BY)


def require_maven() -> str:
    """Path of ``mvn``, or an ``EnvironmentProblem`` naming what to install."""
    return require_tool("mvn", NEEDED_BY)


def command(job: Job, key: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment of the Kafka Streams contender ``key`` (see :data:`VARIANTS`)."""
    variant = VARIANTS[key]
    built = build(job.source / "bench" / "kstreams")
    argv = [
        require_java(), "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", f"{built / JAR}{os.pathsep}{built / 'lib' / '*'}", MAIN_CLASS,
        "--bootstrap", job.bootstrap, "--input", job.input_topic,
        "--output", job.output_topic, "--group", job.group,
        "--commit-interval", str(job.commit_interval), "--pipeline", job.pipeline,
        "--state-dir", str(job.state_dir), "--warmup-records", str(variant.warmup_records),
    ]  # fmt: skip
    if variant.cache_max_bytes is not None:
        argv += ["--cache-max-bytes", str(variant.cache_max_bytes)]
    return argv, dict(os.environ)
