"""The chart's pipelineSpec schema is generated from the spec compiler's step table
(tools/pipeline_schema.py) and the checked-in one is that generation (issue 56, scope 5)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from unittest import mock

from app.pipeline import spec

REPO = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    path = REPO / "tools" / "pipeline_schema.py"
    found = importlib.util.spec_from_file_location("pipeline_schema", path)
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules.setdefault("pipeline_schema", module)
    found.loader.exec_module(module)
    return module


def test_the_checked_in_schema_is_the_generated_one() -> None:
    tool = _tool()
    text = tool.SCHEMA.read_text()
    assert tool.generated(text) == text, "run tools/pipeline_schema.py, then tools/chart_readme.py"
    assert tool.main(["--check"]) == 0


def test_the_schema_names_every_step_of_the_compiler() -> None:
    schema = json.loads(_tool().SCHEMA.read_text())["properties"]["pipelineSpec"]
    bare, mapping = schema["properties"]["steps"]["items"]["anyOf"]
    assert sorted(bare["enum"]) == sorted(spec.STEP_COMPILERS)
    assert sorted(mapping["properties"]) == sorted(spec.STEP_COMPILERS)
    assert mapping["additionalProperties"] is False


def test_a_new_step_in_the_compiler_is_a_drift(tmp_path: Path) -> None:
    tool = _tool()
    copy = tmp_path / "values.schema.json"
    copy.write_text(tool.SCHEMA.read_text())
    with mock.patch.dict(spec.STEP_COMPILERS, {"explode": spec.STEP_COMPILERS["filter"]}):
        assert tool.main(["--check", "--schema", str(copy)]) == 1
        assert tool.main(["--schema", str(copy)]) == 0
        items = json.loads(copy.read_text())["properties"]["pipelineSpec"]["properties"]
        assert "explode" in items["steps"]["items"]["anyOf"][0]["enum"]
        assert tool.main(["--check", "--schema", str(copy)]) == 0
