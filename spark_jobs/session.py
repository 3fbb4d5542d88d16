"""The SparkSession every job uses: our jars, Delta, small-machine defaults."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.jars import ensure_jars
from spark_jobs.scratch import claim_scratch
from spark_jobs.security import SECRET_OPTIONS_REGEX

ALWAYS: Mapping[str, str] = {
    # Window bounds are shown and compared in UTC whatever the machine's zone.
    "spark.sql.session.timeZone": "UTC",
    # The run summary sums late-row counts over every batch of an available-now run.
    "spark.sql.streaming.numRecentProgressUpdates": "10000",
    # Progress bars on stderr garble job logs; the jobs log their own progress.
    "spark.ui.showConsoleProgress": "false",
    # Reader options that carry credentials or keys are shown as *********(redacted).
    "spark.sql.redaction.options.regex": SECRET_OPTIONS_REGEX,
}

# Local-mode defaults sized for a laptop or a CI box; override per job with ``conf``.
LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    # Delta rebuilds table snapshots with this many tasks (default 50): far too many here.
    "spark.databricks.delta.snapshotPartitions": "2",
}

# The driver's log4j2 setup: Spark's own defaults (WARN and up, on stderr), but each event on
# one line and without its stack trace. A failed query is reported once, in one line, by
# spark_jobs.failures; the pages of Java frames Spark logs on the way are what made a missing
# topic print 420 lines. The shell loggers' level is the root's: when they differ, Spark prints
# "Setting default log level to ..." on stderr at start. --conf spark.driver.extraJavaOptions=...
# replaces this for debugging.
LOG4J2_PROPERTIES = r"""
rootLogger.level = warn
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = warn
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.alwaysWriteExceptions = false
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %replace{%m}{[\\r\\n][\\s\\S]*}{ ...}%n
"""

DELTA_CONF: Mapping[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def build_session(
    app_name: str,
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
) -> SparkSession:
    """Create (or return the running) SparkSession with the Kafka source and Delta on board.

    Args:
        app_name: shown in logs and the Spark UI.
        master: Spark master URL; None keeps whatever ``spark-submit`` configured.
        conf: extra settings, applied last.
        log_level: Spark's own log level on stderr (WARN, or ERROR: ``make demo``).
    """
    jars = ",".join(str(p) for p in ensure_jars())
    builder = SparkSession.builder.appName(app_name).config("spark.jars", jars)
    scratch = str(claim_scratch())
    log4j = Path(scratch) / "log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES.replace("level = warn", f"level = {log_level.lower()}"))
    builder = builder.config("spark.local.dir", scratch).config(
        "spark.driver.extraJavaOptions",
        f"-Djava.io.tmpdir={scratch} -Dlog4j2.configurationFile=file:{log4j}",
    )
    if master is not None:
        builder = builder.master(master)
    local = LOCAL_DEFAULTS if master is not None and master.startswith("local") else {}
    for key, value in {**ALWAYS, **local, **DELTA_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    with _local_dirs(scratch):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


@contextmanager
def _local_dirs(scratch: str) -> Iterator[None]:
    """SPARK_LOCAL_DIRS wins over spark.local.dir: point it at the driver's scratch directory
    while pyspark starts the JVM (which copies the environment), and restore it after, so
    child processes compute the same scratch root as this one."""
    before = os.environ.get("SPARK_LOCAL_DIRS")
    os.environ["SPARK_LOCAL_DIRS"] = scratch
    try:
        yield
    finally:
        if before is None:
            del os.environ["SPARK_LOCAL_DIRS"]
        else:
            os.environ["SPARK_LOCAL_DIRS"] = before
