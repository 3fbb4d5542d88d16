"""bench.ab: the A/B ratio arithmetic on synthetic rates, and the baseline snapshot."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.ab import baseline_snapshot, ratio_rows
from bench.contenders import REPO


def test_ratio_rows_are_medians_of_per_repetition_ratios() -> None:
    rates = {
        ("p1", "bridge-eos", "new", 0): 110.0, ("p1", "bridge-eos", "old", 0): 100.0,
        ("p1", "bridge-eos", "new", 1): 90.0, ("p1", "bridge-eos", "old", 1): 100.0,
        ("p1", "bridge-eos", "new", 2): 300.0, ("p1", "bridge-eos", "old", 2): 200.0,
    }  # fmt: skip
    (row,) = ratio_rows(rates, "new", "old")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "p1"
    assert cells[2:5] == ["100", "110", "1.100"]  # medians 100 / 110; ratios 1.1, 0.9, 1.5
    assert cells[5] == "1.10, 0.90, 1.50"


def test_a_repetition_missing_on_one_side_is_left_out() -> None:
    rates = {
        ("p2", "bridge-eos", "new", 0): 50.0, ("p2", "bridge-eos", "old", 0): 100.0,
        ("p2", "bridge-eos", "new", 1): 80.0,
    }  # fmt: skip
    (row,) = ratio_rows(rates, "new", "old")
    assert "| 0.500 | 0.50 |" in row


def test_the_baseline_snapshot_holds_the_packages_at_that_commit(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    target = baseline_snapshot(head, tmp_path / "old")
    shown = subprocess.run(
        ["git", "show", f"{head}:app/__init__.py"], cwd=REPO, capture_output=True, check=True
    ).stdout
    assert (target / "app" / "__init__.py").read_bytes() == shown
    assert (target / "bench" / "pipelines.py").is_file()


def test_code_without_app_main_is_started_through_app_cli(tmp_path: Path) -> None:
    from bench.ab import EarlierEntry, _fields
    from bench.contenders import BY_KEY, Job

    entry = EarlierEntry(**_fields(BY_KEY["bridge-eos"]))  # type: ignore[arg-type]
    job = Job("b:1", "p1", "in", "out", "g", 1.0, tmp_path / "state", source=tmp_path)
    (tmp_path / "app").mkdir()
    assert entry.command(job)[0][1:4] == ["-m", "app.cli", "run"]
    (tmp_path / "app" / "__main__.py").touch()
    assert entry.command(job)[0][1:4] == ["-m", "app", "run"]


def test_cpu_rows_keep_their_decimals() -> None:
    cpus = {("p1", "bridge-eos", "new", 0): 4.2, ("p1", "bridge-eos", "old", 0): 4.0}
    (row,) = ratio_rows(cpus, "new", "old", ".2f")
    assert "| 4.00 | 4.20 | 1.050 |" in row
