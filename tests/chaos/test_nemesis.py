"""One nemesis round in the test suite (the full run is ``make chaos``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.nemesis import run_round
from tests.support.chaos import Rig

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def test_one_nemesis_round(rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = int(os.environ.get("CHAOS_SEED", "14"))
    monkeypatch.setenv("CHAOS_STALL_DIR", str(tmp_path))  # restored afterwards
    result = run_round(rig, tmp_path, seed, 0)
    print(result.line(seed))
    assert result.error is None, (
        f"replay: python -m tests.chaos.nemesis --seed {seed} --only-round 0\n{result.error}"
    )
    assert result.records > 0
