"""Start-up step of a regrouped pipeline: the plan (app.pipeline.split), refused where it
cannot be exactly once, and its repartition topic (created or checked)."""

from __future__ import annotations

from typing import Any

from app.config import BridgeSettings
from app.errors import ConfigError
from app.kafka.repartition import ensure_repartition_topic, partition_count
from app.pipeline.builder import Pipeline
from app.pipeline.split import Regroup, split


def regroup_plan(settings: BridgeSettings, pipeline: Pipeline) -> Regroup | None:
    """The cut of ``pipeline`` (no I/O), refused on two clusters.

    Raises:
        ConfigError: source ≠ target cluster (the hop's records and the input offsets would
            be in different clusters' transactions).
    """
    plan = split(pipeline.steps, settings.group_id)
    if plan is not None and settings.cross_cluster:
        raise ConfigError(
            f"pipeline step {plan.step!r} regroups records through a repartition topic, which "
            f"two clusters (target.bootstrap_servers) do not support; if the input is keyed "
            f"by that key already, say repartition: false on the step"
        )
    return plan


def prepare_repartition(
    settings: BridgeSettings, plan: Regroup | None, admin: Any
) -> Regroup | None:
    """Create (or check) the plan's topic with the inputs' largest partition count."""
    if plan is not None:
        timeout = settings.startup_timeout
        counts = [partition_count(admin, t, timeout) or 1 for t in settings.input_topics]
        partitions = plan.partitions or max(counts)
        ensure_repartition_topic(admin, plan.topic, partitions, timeout)
    return plan
