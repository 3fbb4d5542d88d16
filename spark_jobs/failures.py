"""Every way a job ends, as an exit code and one line on stderr (never a traceback).

``2`` the user's mistake (an option, the spec, the table path, a missing tool), ``3``
infrastructure or anything unexpected (a missing topic, no broker, a failed query): a
restart may recover. The full trace, Python and Java, is logged at DEBUG (``--log-level
DEBUG``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from py4j.protocol import Py4JError, Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException

from spark_jobs.errors import InfrastructureError, SparkJobError

log = logging.getLogger("spark_jobs.failures")

USER_MISTAKE = 2
INFRASTRUCTURE = 3


def run_job(prog: str, body: Callable[[], int]) -> int:
    """Run a job's main ``body``; a failure prints ``prog: message`` and returns its code."""
    try:
        return body()
    except InfrastructureError as exc:
        return _fail(prog, str(exc), INFRASTRUCTURE)
    except SparkJobError as exc:
        return _fail(prog, str(exc), USER_MISTAKE)
    except (PySparkException, Py4JError) as exc:
        return _fail(prog, f"Spark failed: {first_line(exc)}", INFRASTRUCTURE)
    except Exception as exc:  # the last line of defence: one line, never a traceback
        return _fail(prog, f"{type(exc).__name__}: {first_line(exc)}", INFRASTRUCTURE)


def _fail(prog: str, message: str, code: int) -> int:
    log.debug("%s failed (exit %d)", prog, code, exc_info=True)
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return code


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (Spark's run to pages)."""
    if isinstance(exc, Py4JJavaError):
        innermost = exc.java_exception
        while innermost.getCause() is not None:
            innermost = innermost.getCause()
        text = str(innermost.toString())
    else:
        text = str(exc)
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def java_causes(exc: Py4JJavaError) -> list[str]:
    """Class names of a Java exception and its causes, outermost first."""
    names: list[str] = []
    current = exc.java_exception
    while current is not None and len(names) < 20:
        names.append(str(current.getClass().getName()))
        current = current.getCause()
    return names
