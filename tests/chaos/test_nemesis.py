"""One nemesis round in the test suite (the full run is ``make chaos``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.nemesis import run_round
from tests.support.chaos import Rig

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_one_nemesis_round(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    """One round of the seed's faults under each group protocol (the full run draws it)."""
    seed = int(os.environ.get("CHAOS_SEED", "14"))
    monkeypatch.setenv("CHAOS_STALL_DIR", str(tmp_path))  # restored afterwards
    result = run_round(rig, tmp_path, seed, 0, protocol)
    print(result.line(seed))
    assert result.error is None, (
        f"replay: python -m tests.chaos.nemesis --seed {seed} --only-round 0 "
        f"--protocol {protocol}\n{result.error}"
    )
    assert result.records > 0
