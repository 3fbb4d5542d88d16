"""``make demo``'s output is the demo's own (issue 56, acceptance 4): between its first and
last line every line is a ``demo:`` line or what a command the demo runs prints in its own
format (verify, the Spark job's progress and table, ``dlq summary``); no raw librdkafka line,
no Spark WARN line, no launcher banner. The demo runs whole, as ``make demo`` runs it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.cli import REPO

# The whole demo (its Spark jobs included, about 3 minutes): in `make test-long-spark`.
pytestmark = [pytest.mark.spark, pytest.mark.long_spark]

OWN = [
    r"demo: .*",
    r"verify: .*",
    r"\d+ in, \d+ out, 0 duplicates, 0 missing, \d+ dead-lettered",
    r"\S+ \S+ spark_jobs\.stream INFO .*",  # the job's progress lines (its own logger)
    r"stream summary: .*",
    r"[+|].*",  # the aggregate table
    r"only showing top \d+ rows",
    r"\d+ dead letters in 'payments-enriched\.dlq'",
    r" +\d+  \w+  step .*",  # dlq summary's rows
    # The JVM's own banner for the incubator module Spark 4's launcher adds: no Spark or
    # librdkafka log line, and not the demo's to silence (issue 56: left, said in the report).
    r"WARNING: Using incubator modules: jdk\.incubator\.vector",
]


def test_make_demo_prints_only_its_own_lines() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "devkit.demo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 0, "\n".join(lines[-40:])
    strangers = [line for line in lines if not any(re.fullmatch(p, line) for p in OWN)]
    assert strangers == [], "\n".join(strangers)
    assert any("dead letters in" in line for line in lines)
    assert any("approx_count_distinct" in line for line in lines)
