"""Errors the Spark jobs raise on purpose, and the exit code each means.

::

    SparkJobError                 root
    ├── EnvironmentProblem        java or mvn missing, jar fetch failed           exit 2
    ├── JobConfigError            an option or the spec is invalid; names it     exit 2
    └── InfrastructureError       a missing topic, no reachable broker           exit 3

:func:`spark_jobs.failures.run_job` turns each into one line on stderr.
"""

from __future__ import annotations


class SparkJobError(RuntimeError):
    """Root of the errors a Spark job raises on purpose."""


class EnvironmentProblem(SparkJobError):
    """A tool the jobs need (Java, Maven) is missing or the jar fetch failed."""


class JobConfigError(SparkJobError):
    """An option is invalid; the message names the option and what to do."""


class InfrastructureError(SparkJobError):
    """Something outside the job is missing or unreachable; a restart may recover."""
