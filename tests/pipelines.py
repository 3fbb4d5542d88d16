"""Pipelines the end-to-end tests load with ``BRIDGE_PIPELINE=tests.pipelines:<name>``.

None of them sleeps: a test's progress is driven by the input it feeds (tests.support.feed),
never by pacing the pipeline, which would make a fault land at a point that depends on how
fast the machine is.
"""

from __future__ import annotations

from typing import Any

from app.pipeline import Pipeline


def _tag(value: Any) -> Any:
    value["bridged"] = True
    return value


tagged = Pipeline().map(_tag)
