"""The broker jars (``pom.xml`` next to this file), fetched by the project's one Maven fetcher.

Cached in ``$EOS_BRIDGE_HOME/kafka-broker-jars-<hash of the pom>`` by :mod:`spark_jobs.maven`, so a
second start runs no Maven at all.
"""

from __future__ import annotations

from pathlib import Path

from spark_jobs.errors import EnvironmentProblem
from spark_jobs.maven import cache_home, fetch_jars, require_tool

POM = Path(__file__).with_name("pom.xml")
NEEDED_BY = "the local Kafka broker"

__all__ = ["POM", "EnvironmentProblem", "cache_home", "ensure_kafka_jars", "require_java"]


def require_java() -> str:
    """Path of the ``java`` binary, or a clear :class:`EnvironmentProblem`."""
    return require_tool("java", NEEDED_BY)


def ensure_kafka_jars() -> Path:
    """Directory holding the Kafka broker jars (fetched on first use)."""
    return fetch_jars(POM, "kafka-broker-jars", NEEDED_BY)[0].parent
