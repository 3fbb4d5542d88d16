"""The soak harness kept honest (``make soak`` runs it for hours): a short run of it on the
shared rig, until its first fault has run, and the CSV, the plot and the oracle's verdict must be
there. (It waits on conditions, so its length proves nothing: 120 s with two faults took 148 s of
CI; the harness's parts are the same with one.)"""

from __future__ import annotations

import csv
from pathlib import Path

import orjson
import pytest

from tests.chaos.soak import FIELDS, run
from tests.support.chaos import Rig

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_a_short_soak_samples_and_checks_exactly_once(rig: Rig, tmp_path: Path) -> None:
    result = run(rig, tmp_path, duration=5, rate=200, fault_period=5, every=2, min_faults=1)
    assert result.error is None, result.error
    with (tmp_path / "soak.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == FIELDS
    assert {r["instance"] for r in rows} == {"i0", "i1"}
    assert all(int(r["rss_bytes"]) > 0 and int(r["fds"]) > 0 for r in rows)
    assert len(result.faults) == 1, result.faults
    assert result.records == result.fed > 0, "the oracle checked everything fed"
    assert result.repeats > 0, "no id was fed again: the dedupe's state went unchecked"
    summary = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert summary["samples"] == len(rows) and summary["error"] is None
