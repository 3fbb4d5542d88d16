"""Errors the Spark jobs raise on purpose.

::

    SparkJobError                 root; the CLI prints the message and exits 2
    ├── EnvironmentProblem        java or mvn missing, jar fetch failed
    └── JobConfigError            an option is invalid; the message names it
"""

from __future__ import annotations


class SparkJobError(RuntimeError):
    """Root of the errors a Spark job raises on purpose."""


class EnvironmentProblem(SparkJobError):
    """A tool the jobs need (Java, Maven) is missing or the jar fetch failed."""


class JobConfigError(SparkJobError):
    """An option is invalid; the message names the option and what to do."""
