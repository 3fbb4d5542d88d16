"""Pipelines the end-to-end tests load with ``BRIDGE_PIPELINE=tests.pipelines:<name>``.

None of them sleeps: a test's progress is driven by the input it feeds (tests.support.feed),
never by pacing the pipeline, which would make a fault land at a point that depends on how
fast the machine is.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from app.pipeline import Pipeline, Row, StepContext


def _tag(value: Any) -> Any:
    value["bridged"] = True
    return value


tagged = Pipeline().map(_tag)


class HangOn:
    """Blocks forever on a record whose value has ``"hang": true`` (a stuck user function)."""

    name = "hang"
    stateful = False

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        if any(isinstance(r.value, dict) and r.value.get("hang") for r in rows):
            logging.getLogger(__name__).warning("test step hang: blocking forever")
            threading.Event().wait()
        return rows


hangs = Pipeline().then(HangOn())


def _strict(value: Any) -> Any:
    if value.get("legacy"):  # the bug `dlq replay` follows: legacy records are refused
        raise ValueError("legacy record")
    return value


def _lenient(value: Any) -> Any:
    if value.get("hopeless"):  # the fix takes legacy records, not these
        raise ValueError("hopeless record")
    return value


counts_strict = Pipeline().map(_strict).count()
counts_fixed = Pipeline().map(_lenient).count()
hourly_strict = Pipeline().map(_strict).window(3600, grace=1800).aggregate("sum", "amount")
hourly_fixed = Pipeline().map(_lenient).window(3600, grace=1800).aggregate("sum", "amount")
plain_strict = Pipeline().map(_strict)
plain_fixed = Pipeline().map(_lenient)
