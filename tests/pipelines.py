"""Pipelines the end-to-end tests load with ``BRIDGE_PIPELINE=tests.pipelines:<name>``."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from app.pipeline import Pipeline, Row, StepContext


class Throttle:
    """Sleeps per batch so faults can be injected mid-run (tests only)."""

    name = "throttle"
    stateful = False

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        time.sleep(self.seconds)
        return rows


def _tag(value: Any) -> Any:
    value["bridged"] = True
    return value


# ~20 ms per batch: with batch_size 500 a 100k-record run takes ~5 s of sleeping.
throttled = Pipeline().then(Throttle(0.02)).map(_tag)


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
