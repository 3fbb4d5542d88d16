"""The Kafka-source and Delta jars, fetched from Maven Central once and reused.

The jars listed by ``pom.xml`` (next to this file) are copied by Maven into
``$EOS_BRIDGE_HOME/spark-jars-<hash of the pom>`` (default home: ``~/.cache/eos-bridge``) by
:mod:`spark_jobs.maven`, so a changed pom fetches anew and an unchanged one never starts Maven.
Spark gets them as local paths through ``spark.jars``; nothing is resolved with Ivy at run
time. An image that bakes the jars in sets ``EOS_SPARK_JARS_DIR`` and needs neither Maven nor
the network.
"""

from __future__ import annotations

import os
from pathlib import Path

from spark_jobs.errors import EnvironmentProblem
from spark_jobs.maven import fetch_jars

POM = Path(__file__).with_name("pom.xml")
JARS_DIR_ENV = "EOS_SPARK_JARS_DIR"


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
    alternative = f"or set {JARS_DIR_ENV} to a directory that already holds the jars"
    return fetch_jars(pom, "spark-jars", "the Spark jobs", alternative)
