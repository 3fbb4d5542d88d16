"""MirrorMaker 2 (Apache Kafka's connect-mirror), dedicated mode, exactly-once (KIP-618 with
KIP-710's internal REST server), as the cross-cluster ``copy`` contender.

``java -cp <jars> org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`` is what
``connect-mirror-maker.sh`` runs. The jars come from Maven Central by the project's one Maven
step (``bench/mm2/pom.xml``, cached like the broker's). The source cluster's alias is unique per
run, so the copy lands in ``<alias>.<input>`` on the target (MirrorMaker's default naming) and
its internal topics are new each run: :func:`output_topic` tells the harness that name.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.contenders import Job
from devkit.kafka.jars import require_java
from spark_jobs.maven import fetch_jars

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
NEEDED_BY = "the MirrorMaker 2 bench contender"


def alias(group: str) -> str:
    """The source cluster's alias of one run (the harness's group name is unique per run)."""
    return group.replace(".", "-")


def output_topic(group: str, input_topic: str) -> str:
    """Where MirrorMaker 2 copies ``input_topic`` to (DefaultReplicationPolicy)."""
    return f"{alias(group)}.{input_topic}"


def properties(job: Job) -> str:
    """The dedicated-mode configuration: one flow source → target, exactly-once on the target,
    nothing but the copy (no heartbeats, checkpoints, group or config syncing)."""
    src = alias(job.group)
    commit_ms = int(job.commit_interval * 1000)
    lines = [
        f"clusters = {src}, target",
        f"{src}.bootstrap.servers = {job.bootstrap}",
        f"target.bootstrap.servers = {job.target}",
        f"{src}->target.enabled = true",
        f"{src}->target.topics = {job.input_topic}",
        f"target->{src}.enabled = false",
        "target.exactly.once.source.support = enabled",
        "dedicated.mode.enable.internal.rest = true",
        "listeners = http://127.0.0.1:0",
        f"{src}.consumer.isolation.level = read_committed",
        "tasks.max = 4",
        f"offset.flush.interval.ms = {commit_ms}",
        "emit.heartbeats.enabled = false",
        "emit.checkpoints.enabled = false",
        "sync.group.offsets.enabled = false",
        "sync.topic.configs.enabled = false",
        "sync.topic.acls.enabled = false",
        "refresh.topics.interval.seconds = 5",
    ]
    for topic in ("", "offset-syncs.topic.", "checkpoints.topic.", "heartbeats.topic.",
                  "offset.storage.", "config.storage.", "status.storage."):  # fmt: skip
        lines.append(f"{topic}replication.factor = 1")
    return "\n".join(lines) + "\n"


def command(job: Job) -> tuple[list[str], dict[str, str]]:
    """argv and environment of one MirrorMaker 2 run (its properties file in the state dir)."""
    jars = fetch_jars(job.source / "bench" / "mm2" / "pom.xml", "mm2-jars", NEEDED_BY)
    job.state_dir.mkdir(parents=True, exist_ok=True)
    config = job.state_dir / "mm2.properties"
    config.write_text(properties(job))
    log4j = Path(job.source / "bench" / "mm2" / "log4j2.properties")
    argv = [
        require_java(), f"-Dlog4j2.configurationFile={log4j}",
        "-cp", os.pathsep.join(str(j) for j in jars), MAIN_CLASS, str(config),
    ]  # fmt: skip
    return argv, dict(os.environ)
