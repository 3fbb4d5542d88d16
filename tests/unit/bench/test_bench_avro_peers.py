"""The Avro peers of the issue-29 bench (no broker, no registry, no timings): the hand loop's
wire format and codec, the command lines of the new contenders, the report's goal-less
comparisons and the codec-cost budget arithmetic."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from fastavro import schemaless_writer

from bench.codec_cost import Budget, budget, inputs
from bench.contenders import BY_KEY, REGISTRY_URL_ENV, Job
from bench.contenders.hand_avro import AvroValues, header, parse, schema_id_of
from bench.report import _goal, summarise
from bench.transforms import enrich, keep
from tests.unit.bench.runs import run

SCHEMAS = Path(__file__).resolve().parents[3] / "bench" / "schemas"


def test_the_header_is_magic_byte_and_big_endian_id() -> None:
    assert header(258) == b"\x00\x00\x00\x01\x02"
    assert schema_id_of(header(258) + b"body") == 258
    for bad in (b"\x01\x00\x00\x00\x01x", b"\x00\x00"):
        with pytest.raises(ValueError, match="wire format"):
            schema_id_of(bad)


def test_the_hand_codec_reads_by_writer_id_once_and_writes_the_output_id() -> None:
    writer = parse((SCHEMAS / "input.avsc").read_text())
    fetched: list[int] = []

    def fetch(schema_id: int) -> object:
        fetched.append(schema_id)
        return writer

    as_json, as_avro, _ = inputs(20)
    values = AvroValues(parse((SCHEMAS / "p1.avsc").read_text()), 7, fetch)
    decoded = [values.loads(m.value()) for m in as_avro]
    assert decoded == [orjson.loads(m.value()) for m in as_json] and fetched == [1]
    out = enrich(decoded[0])
    body = io.BytesIO()
    schemaless_writer(body, parse((SCHEMAS / "p1.avsc").read_text()), out)
    assert values.dumps(out) == header(7) + body.getvalue()


def test_the_new_contenders_command_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(REGISTRY_URL_ENV, "http://127.0.0.1:1/apis/ccompat/v7")
    monkeypatch.setenv("QUIX_PYTHON", "/bin/sh")  # exists: the argv is all that is checked
    job = Job("b:9092", "p1", "bench-in-kv-avro", "out", "g", 1.0, tmp_path)
    argv = {k: BY_KEY[k].command(job)[0] for k in ("hand-alo", "hand-eos", "hand-eos-avro")}
    assert "--eos" not in argv["hand-alo"] and "--registry" not in argv["hand-eos"]
    assert "--eos" in argv["hand-eos"] and "--eos" in argv["hand-eos-avro"]
    for key in ("hand-eos-avro", "quix-eos-avro"):
        line = BY_KEY[key].command(job)[0]
        assert line[line.index("--registry") + 1].endswith("/apis/ccompat/v7")
        assert line[line.index("--schema") + 1] == str(SCHEMAS / "p1.avsc")
        assert BY_KEY[key].input_topic("bench-in-kv") == "bench-in-kv-avro"
        assert [BY_KEY[key].runs(p) for p in ("p1", "p2", "p3")] == [True, True, False]


def test_the_report_compares_the_families_without_a_goal() -> None:
    runs = [run("hand-eos", 0, 100.0), run("hand-eos-avro", 0, 40.0)]
    runs += [run("bridge-eos-avro", 0, 20.0), run("quix-eos", 0, 10.0)]
    goals = summarise(runs, [])["p1"]["goals"]
    assert goals["hand-eos-avro/hand-eos"]["ratio"] == 0.4
    assert goals["bridge-eos-avro/hand-eos-avro"]["ratio"] == 0.5
    assert goals["quix-eos-avro/quix-eos"]["ratio"] is None  # not in the run
    assert _goal(goals["hand-eos-avro/hand-eos"]) == "no goal"
    assert _goal({"goal": 0.8, "ratio": 0.5}) == "goal ≥ 0.8: NOT met"


def test_the_budget_arithmetic() -> None:
    b = Budget(json_path_us=5.0, json_codec_us=1.0, avro_codec_us=6.0, goal=0.8)
    assert b.avro_path_us == 10.0 and b.ratio == 0.5
    assert b.allowed_avro_codec_us == pytest.approx(2.25)  # 5 / 0.8 = 6.25 = 5 - 1 + 2.25
    costs = {
        "orjson loads (input)": 0.5, "orjson dumps (P1 output)": 0.2,
        "fastavro decode (input, 5-byte header)": 3.0,
        "fastavro encode (P1 output, 5-byte header)": 3.0, "P1 pass fraction": 0.5,
    }  # fmt: skip
    weighted = budget(costs, 5.0, 0.8)
    assert weighted.json_codec_us == pytest.approx(0.6) and weighted.avro_codec_us == 4.5


def test_the_avro_twin_keeps_p1s_pass_fraction() -> None:
    as_json, as_avro, values = inputs(50)
    passing = [keep(orjson.loads(m.value())) for m in as_json]
    assert [keep(values.loads(m.value())) for m in as_avro] == passing
