"""The example pipelines of examples/pipelines/: each YAML file and its Python twin in
clicks_pipelines.py give the same outputs on the example input, and those are right by an
independent count (issue 32, scope 4)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.pipeline import Pipeline, Row, StepContext, load_pipeline
from app.pipeline.spec import load_spec
from tests.support.state import LocalAccess

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PIPELINES = EXAMPLES / "pipelines"
KAFKA_TIMESTAMP = 1_764_000_000_000  # 2025-11-24: produced after the events of the examples
PAIRS = {
    "clicks-per-user": ("clicks_per_user", "clicks.jsonl"),
    "clicks-per-minute": ("clicks_per_minute", "clicks.jsonl"),
    "payments-routed": ("payments_routed", "payments.jsonl"),
}


def records(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (EXAMPLES / name).read_text().splitlines()]


def run(pipeline: Pipeline, values: list[dict[str, Any]], root: Path) -> list[tuple[Any, ...]]:
    """(topic, key, value) of every output, one batch per record (keys: the ``user`` field,
    as ``produce --key-field user`` writes them); no record may fail."""
    access = LocalAccess(root)
    out = []
    for offset, value in enumerate(values):
        rows = [Row(value, value["user"].encode(), None, "in", 0, offset, KAFKA_TIMESTAMP)]
        ctx = StepContext(retries=0, state=access)
        for step in pipeline.steps:
            rows = step(rows, ctx)
        assert not ctx.failures
        out += [(r.topic, r.key, r.value) for r in rows]
        access.commit()
    access.close()
    return out


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_yaml_example_equals_its_python_twin(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(PIPELINES))
    attr, data = PAIRS[name]
    spec = load_spec(PIPELINES / f"{name}.yaml")
    python = load_pipeline(f"clicks_pipelines:{attr}")
    values = records(data)
    assert spec.stateful == python.stateful
    from_yaml = run(spec, values, tmp_path / "yaml")
    assert from_yaml == run(python, values, tmp_path / "python")
    assert from_yaml  # an example that outputs nothing shows nothing


def test_clicks_per_user_counts_every_click(tmp_path: Path) -> None:
    clicks = records("clicks.jsonl")
    out = run(load_spec(PIPELINES / "clicks-per-user.yaml"), clicks, tmp_path)
    seen: Counter[str] = Counter()
    expected = []
    for click in clicks:
        seen[click["user"]] += 1
        expected.append(seen[click["user"]])
    assert [v["count"] for _, _, v in out] == expected
    assert [v["key"] for _, _, v in out] == [c["user"] for c in clicks]


def test_clicks_per_minute_emits_each_closed_minute_once(tmp_path: Path) -> None:
    clicks = records("clicks.jsonl")
    out = run(load_spec(PIPELINES / "clicks-per-minute.yaml"), clicks, tmp_path)
    per_minute = Counter((c["user"], c["ts"] - c["ts"] % 60_000) for c in clicks)
    last = max(c["ts"] for c in clicks)
    closed = {w: n for w, n in per_minute.items() if w[1] + 60_000 + 10_000 <= last}
    assert {(v["key"], v["start"]): v["value"] for _, _, v in out} == closed
    assert len(out) == len(closed) == 5  # docs/pipelines.md tails exactly that many


def test_payments_routed_sends_each_payment_to_its_topic(tmp_path: Path) -> None:
    payments = records("payments.jsonl")
    out = run(load_spec(PIPELINES / "payments-routed.yaml"), payments, tmp_path)
    topics = Counter(topic for topic, _, _ in out)
    assert topics == {None: 3, "payments-large": 2, "payments-refunds": 1}  # as the docs tail
    assert all(v["cents"] == round(v["amount"] * 100) for _, _, v in out)
