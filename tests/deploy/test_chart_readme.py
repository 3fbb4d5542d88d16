"""The chart's README (values table) is generated from values.schema.json and kept current."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .helpers import CHART, REPO

pytestmark = pytest.mark.chart

SCRIPT = REPO / "tools" / "chart_readme.py"


def check(chart: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--chart", str(chart)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_chart_readme_is_up_to_date() -> None:
    result = check(CHART)
    assert result.returncode == 0, result.stderr


def test_every_value_has_a_row() -> None:
    readme = (CHART / "README.md").read_text()
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def keys(node: dict[str, Any], prefix: str = "") -> list[str]:
        found = []
        for name, value in node.items():
            props = schema_at(f"{prefix}{name}").get("properties")
            found += keys(value, f"{prefix}{name}.") if props else [f"{prefix}{name}"]
        return found

    def schema_at(key: str) -> dict[str, Any]:
        node = schema
        for part in key.split("."):
            node = node["properties"][part]
        return node

    missing = [k for k in keys(values) if f"| `{k}` |" not in readme]
    assert missing == []


def test_a_schema_change_makes_it_stale(tmp_path: Path) -> None:
    chart = tmp_path / "eos-bridge"
    shutil.copytree(CHART, chart)
    schema = json.loads((chart / "values.schema.json").read_text())
    schema["properties"]["replicaCount"]["description"] = "Changed."
    (chart / "values.schema.json").write_text(json.dumps(schema))

    result = check(chart)

    assert result.returncode == 1
    assert "README.md is out of date: run tools/chart_readme.py" in result.stderr
