"""Stateful pipelines for the state end-to-end tests
(``BRIDGE_PIPELINE=tests.state_pipelines:<name>``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app.pipeline import Pipeline, Row, StepContext


class CrashOnce:
    """Dies (no checkpoint, no cleanup) the first time it sees input offset ``at`` — the
    "error while processing" scenario. A marker file makes it crash only once."""

    name = "crash-once"
    stateful = False

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        marker = Path(os.environ["EOS_TEST_CRASH_MARKER"])
        if not marker.exists() and any(r.offset >= self.at for r in rows):
            marker.write_text("crashed")
            os._exit(17)
        return rows


class PoisonChangelogOnce:
    """Once, at input offset ``at``, puts a value larger than the producer's message.max.bytes
    into its store: producing that changelog record fails in checkpoint step 1, after the
    other stores' records went into the transaction ("changelog produce fails")."""

    name = "poison"
    store = "poison"
    stateful = True

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        marker = Path(os.environ["EOS_TEST_POISON_MARKER"])
        hit = [r for r in rows if r.offset >= self.at]
        if hit and not marker.exists() and ctx.state is not None:
            marker.write_text("poisoned")
            row = hit[0]
            ctx.state.partition(self.store, row.source_topic, row.partition).set(
                b"poison", b"x" * 3_000_000
            )
        return rows


def _id(value: Any) -> Any:
    return value["id"]


counting = Pipeline().count(name="counts")
crashing_count = Pipeline().then(CrashOnce(at=3000)).count(name="counts")
poisoned_count = Pipeline().count(name="counts").then(PoisonChangelogOnce(at=3000))
# Ids are the record keys in these tests, so the dedupe keeps per-input-partition state
# (repartition=False: docs/state.md, Regrouping); test_repartition_e2e.py regroups by the id.
deduping = Pipeline().dedupe(by=_id, ttl=3600, name="seen", repartition=False)
