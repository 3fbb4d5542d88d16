"""The ``eos-bridge`` process itself, without a broker: what a user's shell sees of a mistake
(the exit code, stderr without a traceback). The mistakes themselves are tested in-process in
tests/unit/commands/test_cli_mistakes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import eos_bridge

pytestmark = pytest.mark.integration


def test_run_with_a_broken_pipeline_logs_one_error_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "broken_syntax.py").write_text("from app.pipeline import Pipeline\npipeline = (\n")
    env = {
        "BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPIC": "out", "PYTHONPATH": str(tmp_path),
        "BRIDGE_HTTP_PORT": "0", "BRIDGE_PIPELINE": "broken_syntax:p",
    }  # fmt: skip
    result = eos_bridge("run", env=env)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "syntax error" in errors[0], result.stderr


def test_a_tool_mistake_and_version_through_the_process() -> None:
    result = eos_bridge("produce", "t", stdin='{"id": 1}\n{"id": 2\n')
    assert result.code == 2
    assert result.one_line_error().startswith("eos-bridge produce: stdin:2: not valid JSON")
    version = eos_bridge("--version")
    assert version.code == 0 and version.stdout.startswith("eos-bridge ")
