"""The contenders, each started as its own process by :mod:`bench.harness`.

Every contender reads ``--input`` as consumer group ``--group`` from the earliest offset, writes
``--output``, commits every ``--commit-interval`` seconds and stops cleanly on SIGTERM. A
cross-cluster contender (``xcluster``) reads the bench broker and writes a second one
(``Job.target``, :mod:`bench.xcluster`). Pipeline ``copy`` is a bytes passthrough: only the
contenders that can copy without parsing run it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUIX_VENV = REPO / ".venv-quix"
COPY = "copy"  # the bytes passthrough pipeline
REGROUPED = "p2r"  # P2 by a value field: through a repartition topic


def quix_python() -> Path:
    """The interpreter of Quix Streams' own virtualenv (``make quix-venv``; ``QUIX_PYTHON``
    overrides it).

    Quix 3.28 pins confluent-kafka <2.13 and pydantic-settings <2.16; the bridge runs newer
    ones, so Quix never shares the bridge's environment.
    """
    # Not resolved: the venv's python is a symlink whose location selects the venv.
    python = Path(os.environ.get("QUIX_PYTHON", str(QUIX_VENV / "bin" / "python")))
    if not python.exists():
        raise FileNotFoundError(f"no Quix Streams virtualenv at {python}: run `make quix-venv`")
    return python


@dataclass(slots=True, frozen=True)
class Job:
    """What one contender run is asked to do."""

    bootstrap: str
    pipeline: str  # p1 | p2 | p3
    input_topic: str
    output_topic: str
    group: str
    commit_interval: float
    state_dir: Path
    source: Path = REPO  # the code the contender runs (a snapshot, see bench.cli)
    batch_size: int = 2000
    target: str | None = None  # the second cluster's bootstrap (cross-cluster contenders)


@dataclass(slots=True, frozen=True)
class Contender:
    """A named way of running a pipeline; ``kind`` selects the command line."""

    key: str
    label: str
    kind: str  # bridge | quix | hand | raw | kstreams | mm2
    guarantee: str  # exactly-once | at-least-once
    spec: bool = False  # bridge: the pipeline as a declarative spec (bench/specs/<p>.yaml)
    xcluster: bool = False  # writes to a second cluster (bench.xcluster)
    # bridge: input_format and output_format; None: json, bytes for the copy pipeline
    value_format: str | None = None
    fmt: str = "json"  # bridge: avro = Avro in and out through the run's registry (its topic too)
    extra: tuple[tuple[str, str], ...] = ()  # bridge: more BRIDGE_* settings

    def runs(self, pipeline: str) -> bool:
        """Whether this contender runs ``pipeline``: ``copy`` only the bridge (without a spec)
        and the raw copy; a cross-cluster one only P1 and ``copy``; the rest everything."""
        if self.kind == "mm2":  # copies bytes, transforms nothing
            return pipeline == COPY
        if pipeline == REGROUPED:  # the bridge's Python pipeline and Kafka Streams' groupBy
            plain = self.fmt == "json" and not (self.spec or self.xcluster or self.extra)
            return self.kind == "kstreams" or (self.kind == "bridge" and plain)
        if self.fmt != "json":  # Avro: P1 and P2 (P3's windows read the record timestamp)
            return pipeline in ("p1", "p2")
        if self.xcluster:
            return pipeline in ("p1", COPY)
        return pipeline != COPY or (self.kind in ("bridge", "raw") and not self.spec)

    def input_topic(self, topic: str) -> str:
        """The seeded input this contender reads: ``topic``, or its Avro twin."""
        return f"{topic}{AVRO_SUFFIX}" if self.fmt == "avro" else topic

    def command(self, job: Job) -> tuple[list[str], dict[str, str]]:
        """argv and environment of the contender process."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
        env["PYTHONPATH"] = str(job.source)
        if self.kind == "bridge":
            env.update(bridge_env(job, self.guarantee, self.spec, self.value_format))
            if self.fmt == "avro":
                env.update(avro_env(job))
            env.update(self.extra)
            return [sys.executable, "-m", "app", "run"], env
        if self.kind == "kstreams":
            from bench.contenders import kstreams  # here: it imports this module

            return kstreams.command(job, self.key)
        if self.kind == "mm2":
            from bench.contenders import mm2  # here: it imports this module

            return mm2.command(job)
        common = [
            "--bootstrap", job.bootstrap, "--input", job.input_topic,
            "--output", job.output_topic, "--group", job.group,
            "--commit-interval", str(job.commit_interval), "--pipeline", job.pipeline,
        ]  # fmt: skip
        if self.fmt == "avro":
            common += avro_args(job)
        if self.kind == "quix":
            argv = [str(quix_python()), "-m", "bench.contenders.quix", *common]
            argv += ["--guarantee", self.guarantee, "--state-dir", str(job.state_dir)]
            return argv, env
        argv = [sys.executable, "-m", "bench.contenders.hand", *common]
        argv += ["--batch-size", str(job.batch_size)]
        if self.kind == "raw":
            argv += ["--raw"]
        if self.guarantee == "exactly-once":
            argv += ["--eos"]
        return argv, env


def bridge_env(
    job: Job, guarantee: str, spec: bool = False, value_format: str | None = None
) -> dict[str, str]:
    """BRIDGE_* settings of an eos-bridge run (defaults for everything not listed); ``copy``:
    no pipeline, bytes in and out unless ``value_format`` says otherwise; with ``job.target``,
    between two clusters."""
    env = {
        "BRIDGE_BOOTSTRAP_SERVERS": job.bootstrap,
        "BRIDGE_INPUT_TOPICS": f'["{job.input_topic}"]',
        "BRIDGE_OUTPUT_TOPIC": job.output_topic,
        "BRIDGE_DLQ_TOPIC": job.output_topic,  # never used: no record fails
        "BRIDGE_GROUP_ID": job.group,
        "BRIDGE_INSTANCE_ID": "bench",
        "BRIDGE_PIPELINE": f"bench.pipelines:{job.pipeline}",
        "BRIDGE_PROCESSING_GUARANTEE": guarantee,
        "BRIDGE_COMMIT_INTERVAL": str(job.commit_interval),
        "BRIDGE_BATCH_SIZE": str(job.batch_size),
        "BRIDGE_HTTP_PORT": "0",
        "BRIDGE_STATE_DIR": str(job.state_dir),
        "BRIDGE_LOG_LEVEL": "WARNING",
    }
    if job.pipeline == COPY:
        del env["BRIDGE_PIPELINE"]
        value_format = value_format or "bytes"
    elif spec:
        del env["BRIDGE_PIPELINE"]
        env["BRIDGE_PIPELINE_SPEC"] = str(job.source / "bench" / "specs" / f"{job.pipeline}.yaml")
    if value_format not in (None, "json"):
        env["BRIDGE_INPUT_FORMAT"] = env["BRIDGE_OUTPUT_FORMAT"] = value_format
    if job.target is not None:
        env["BRIDGE_TARGET__BOOTSTRAP_SERVERS"] = job.target
    return env


AVRO_SUFFIX = "-avro"
# The URL of the registry ``python -m bench`` started (bench.cli), for the Avro contenders.
REGISTRY_URL_ENV = "EOS_BENCH_REGISTRY_URL"


def registry_url() -> str:
    """The URL of the registry of this bench run (``REGISTRY_URL_ENV``)."""
    url = os.environ.get(REGISTRY_URL_ENV)
    if not url:
        raise RuntimeError(f"an avro contender needs a registry: {REGISTRY_URL_ENV} is not set")
    return url


def output_schema(job: Job) -> Path:
    """The Avro schema of the pipeline's output: ``bench/schemas/<pipeline>.avsc``."""
    return job.source / "bench" / "schemas" / f"{job.pipeline}.avsc"


def avro_env(job: Job) -> dict[str, str]:
    """BRIDGE_* settings of an Avro run: Avro in (writer schema by ID) and Avro out with
    ``bench/schemas/<pipeline>.avsc`` (registered under ``<output topic>-value``)."""
    return {
        "BRIDGE_INPUT_FORMAT": "avro",
        "BRIDGE_OUTPUT_FORMAT": "avro",
        "BRIDGE_SCHEMA_REGISTRY__URL": registry_url(),
        "BRIDGE_OUTPUT_SCHEMA__SCHEMA_FILE": str(output_schema(job)),
    }


def avro_args(job: Job) -> list[str]:
    """The command-line options of an Avro hand loop or Quix run: the registry and the
    output schema (registered under ``<output topic>-value``)."""
    return ["--registry", registry_url(), "--schema", str(output_schema(job))]


CONTENDERS = (
    Contender("bridge-eos", "eos-bridge exactly-once", "bridge", "exactly-once"),
    Contender(
        "bridge-eos-spec", "eos-bridge exactly-once, YAML spec", "bridge", "exactly-once", True
    ),
    Contender("bridge-alo", "eos-bridge at-least-once", "bridge", "at-least-once"),
    # pipelined_commit (issue 34; stateful pipelines too since the committing layer)
    Contender(
        "bridge-eos-pipe",
        "eos-bridge exactly-once, pipelined commit",
        "bridge",
        "exactly-once",
        extra=(("BRIDGE_PIPELINED_COMMIT", "true"),),
    ),
    Contender(
        "bridge-eos-spec-pipe",
        "eos-bridge exactly-once, YAML spec, pipelined commit",
        "bridge",
        "exactly-once",
        True,
        extra=(("BRIDGE_PIPELINED_COMMIT", "true"),),
    ),
    # Two clusters (docs/cross-cluster.md): positions in the target's offsets topic, one
    # transactional producer per input partition.
    Contender(
        "xc-bridge-eos",
        "eos-bridge exactly-once, two clusters",
        "bridge",
        "exactly-once",
        xcluster=True,
    ),
    # MirrorMaker 2 (connect-mirror 4.3.1), dedicated mode, exactly.once.source.support=enabled:
    # the copy between the two clusters only (bench/contenders/mm2.py).
    Contender("mm2-eos", "MirrorMaker 2 exactly-once", "mm2", "exactly-once", xcluster=True),
    Contender(
        "bridge-eos-avro", "eos-bridge exactly-once, Avro", "bridge", "exactly-once", fmt="avro"
    ),
    Contender(
        "bridge-eos-spec-avro",
        "eos-bridge exactly-once, YAML spec, Avro",
        "bridge",
        "exactly-once",
        True,
        fmt="avro",
    ),
    Contender("quix-eos", "Quix Streams exactly-once", "quix", "exactly-once"),
    # Quix's own Avro serializers (quixstreams.models.serializers.avro) on the registry
    Contender(
        "quix-eos-avro", "Quix Streams exactly-once, Avro", "quix", "exactly-once", fmt="avro"
    ),
    Contender("quix-alo", "Quix Streams at-least-once", "quix", "at-least-once"),
    Contender("hand-alo", "hand-written loop at-least-once", "hand", "at-least-once"),
    # One transaction per commit interval (bench/contenders/hand.py --eos); JSON and Avro
    # (bench/contenders/hand_avro.py: one fastavro call per record each way).
    Contender("hand-eos", "hand-written loop exactly-once", "hand", "exactly-once"),
    Contender(
        "hand-eos-avro", "hand-written loop exactly-once, Avro", "hand", "exactly-once", fmt="avro"
    ),
    Contender("raw-copy", "raw copy (no parsing)", "raw", "at-least-once"),
    # Kafka Streams 4.4.0 exactly_once_v2 (bench/kstreams); c0 = statestore.cache.max.bytes=0,
    # warm = after a JIT warm-up phase (bench/contenders/kstreams.py).
    Contender("kstreams-eos", "Kafka Streams EOS-v2", "kstreams", "exactly-once"),
    Contender("kstreams-eos-c0", "Kafka Streams EOS-v2 cache 0", "kstreams", "exactly-once"),
    Contender("kstreams-eos-warm", "Kafka Streams EOS-v2 JIT-warm", "kstreams", "exactly-once"),
    Contender(
        "kstreams-eos-c0-warm", "Kafka Streams EOS-v2 cache 0 JIT-warm", "kstreams", "exactly-once"
    ),
)
BY_KEY = {c.key: c for c in CONTENDERS}
