"""``check-config`` of a regrouped pipeline: the repartition topic named; two clusters
refused in one line naming the step and the way out (docs/state.md, Regrouping)."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import eos_bridge_here


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  - key_by: region\n  - count\n")
    return {
        "BRIDGE_INPUT_TOPICS": "orders",
        "BRIDGE_OUTPUT_TOPIC": "out",
        "BRIDGE_GROUP_ID": "g",
        "BRIDGE_PIPELINE_SPEC": str(spec),
        **more,
    }


def test_check_config_names_the_repartition_topic(tmp_path: Path) -> None:
    result = eos_bridge_here("check-config", env=_env(tmp_path))
    assert result.code == 0, result.stderr
    assert "through repartition topic g-key_by-0-repartition" in result.stderr


def test_two_clusters_refuse_a_regrouped_pipeline_in_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, BRIDGE_TARGET__BOOTSTRAP_SERVERS="elsewhere:9092")
    result = eos_bridge_here("check-config", env=env)
    assert result.code == 2
    line = result.one_line_error()
    assert "steps[0].key_by" in line and "repartition: false" in line
