"""The Avro contenders of ``python -m bench`` (issue 29, acceptance 5): which inputs are seeded,
which pipelines they run, their settings, and the Avro/JSON P1 ratio the report computes
(no broker, no timings)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from bench.cli import input_topics, runs_on
from bench.contenders import BY_KEY, REGISTRY_URL_ENV, Job, avro_env
from bench.data import make_value
from bench.report import summarise
from bench.transforms import enrich
from tests.unit.bench.runs import run

AVRO, SPEC_AVRO, EOS, SPEC = (
    BY_KEY[k] for k in ("bridge-eos-avro", "bridge-eos-spec-avro", "bridge-eos", "bridge-eos-spec")
)


def test_avro_contenders_read_the_avro_twin_and_skip_p3() -> None:
    assert input_topics(["p1", "p2", "p3"], [EOS, AVRO]) == [
        ("bench-in-kv", "bench-in-kv"),
        ("bench-in-kv-avro", "bench-in-kv"),
        ("bench-in-win", "bench-in-win"),
    ]
    assert input_topics(["p3"], [AVRO]) == []
    assert [runs_on(AVRO, p) for p in ("p1", "p2", "p3")] == [True, True, False]
    assert SPEC_AVRO.spec and SPEC_AVRO.fmt == "avro" and EOS.fmt == "json"


def test_avro_settings_name_the_registry_and_the_pipelines_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    job = Job("b:9092", "p1", "bench-in-kv-avro", "out", "g", 1.0, tmp_path)
    monkeypatch.delenv(REGISTRY_URL_ENV, raising=False)
    with pytest.raises(RuntimeError, match=REGISTRY_URL_ENV):
        avro_env(job)
    monkeypatch.setenv(REGISTRY_URL_ENV, "http://127.0.0.1:1/apis/ccompat/v7")
    env = avro_env(job)
    assert env["BRIDGE_INPUT_FORMAT"] == env["BRIDGE_OUTPUT_FORMAT"] == "avro"
    schema = Path(env["BRIDGE_OUTPUT_SCHEMA__SCHEMA_FILE"])
    assert schema.name == "p1.avsc" and schema.exists()


def test_the_schemas_fit_the_records_and_p1s_output() -> None:
    """Every field of the seeded record and of P1's output is in its schema (and only those)."""
    from fastavro import parse_schema, validate

    bench = Path(__file__).resolve().parents[3] / "bench" / "schemas"
    record = orjson.loads(make_value(3, 42, random.Random(1), 1_700_000_000_000))
    for name, value in (("input", record), ("p1", enrich(record))):
        schema = parse_schema(json.loads((bench / f"{name}.avsc").read_text()))
        assert validate(value, schema, strict=True)


def test_the_report_gives_avro_p1_over_json_p1_per_repetition() -> None:
    runs = [
        run("bridge-eos", 0, 100.0), run("bridge-eos-avro", 0, 90.0),
        run("bridge-eos", 1, 200.0), run("bridge-eos-avro", 1, 120.0),
        run("bridge-eos", 2, 100.0), run("bridge-eos-avro", 2, 70.0),
        run("bridge-eos-spec", 0, 100.0), run("bridge-eos-spec-avro", 0, 80.0),
    ]  # fmt: skip
    goals = summarise(runs, [])["p1"]["goals"]
    avro = goals["bridge-eos-avro/bridge-eos"]
    assert avro["per_rep"] == [0.9, 0.6, 0.7] and avro["ratio"] == 0.7 and avro["goal"] == 0.8
    assert goals["bridge-eos-spec-avro/bridge-eos-spec"]["ratio"] == 0.8
