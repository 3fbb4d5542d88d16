"""``pipelineSpec`` is validated at ``helm template`` time against the schema generated from the
bridge's step table (tools/pipeline_schema.py; issue 56, acceptance 3): a step the bridge
does not know fails the render naming it, instead of pods that crash-loop with exit 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from .helpers import HelmError, Manifest

pytestmark = pytest.mark.chart

REQUIRED = [
    "bridge.bootstrapServers=kafka:9092",
    "bridge.inputTopics={in}",
    "bridge.outputTopic=out",
]


def _values(tmp_path: Path, spec: object) -> Path:
    path = tmp_path / "spec-values.yaml"
    path.write_text(yaml.safe_dump({"pipelineSpec": spec}))
    return path


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"steps": [{"filtr": "amount > 0"}]}, "filtr"),
        # a bare name: helm's validator names the position and the known steps, not the value
        ({"steps": [{"filter": "amount > 0"}, "cnt"]}, "/pipelineSpec/steps/1"),
        ({"step": [{"filter": "amount > 0"}]}, "step"),
    ],
)
def test_an_unknown_step_fails_the_render_naming_it(
    template: Callable[..., str], tmp_path: Path, spec: object, named: str
) -> None:
    with pytest.raises(HelmError) as failure:
        template(_values(tmp_path, spec), sets=REQUIRED)
    said = str(failure.value)
    assert "pipelineSpec" in said and named in said, said
    print(said.splitlines()[0][:300])


def test_every_step_of_the_bridge_renders(
    manifests: Callable[..., list[Manifest]], tmp_path: Path
) -> None:
    steps = [
        {"filter": "amount > 0"},
        {"map": {"id": "id", "amount": "amount"}},
        {"set": {"big": "amount > 100"}},
        {"drop": ["debug"]},
        {"rename": {"id": "order_id"}},
        {"key_by": "order_id"},
        {"route": "None"},
        {"dedupe": {"by": "order_id", "ttl": 60}},
        "count",
        {"sum": {"field": "amount"}},
        {"window": {"size": 60, "aggregate": "count"}},
    ]
    rendered = manifests(_values(tmp_path, {"steps": steps}), sets=REQUIRED)
    configs = [r for r in rendered if r["kind"] == "ConfigMap"]
    assert any("order_id" in str(r.get("data")) for r in configs), configs
