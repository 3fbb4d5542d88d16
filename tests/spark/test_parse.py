"""Bad-record diagnoses of ``parse_records`` on a static DataFrame (no Kafka needed).

Each malformed row gets the error text docs/spark.md documents; a valid row gets none.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.fixed import fixed_spec
from spark_jobs.parse import parse_records
from spark_jobs.spec import InputField

pytestmark = pytest.mark.spark

DOCS = Path(__file__).resolve().parents[2] / "docs" / "spark.md"

GOOD = '{"id": "a-1", "key": "user-1", "amount": 1.5, "ts": 1000, "extra": [1]}'
CASES: dict[str | None, str] = {
    "{not json": "malformed JSON",
    '{"id": "a-2", "key": ': "malformed JSON",
    "": "malformed JSON",
    "[1, 2, 3]": "not a JSON object",
    "42": "not a JSON object",
    '"text"': "not a JSON object",
    "null": "not a JSON object",
    '{"id": "x-1", "key": "user-1", "amount": 1.5}': "missing: ts",
    '{"id": "x-2", "key": "user-2", "amount": "lots", "ts": 1}': "wrong type: amount",
    '{"id": "x-3", "amount": "lots", "ts": null}': "missing: key, ts; wrong type: amount",
    '{"id": "x-4", "key": "user-4", "amount": 1.5, "ts": -5}': "ts out of range",
    None: "null value",
}


def test_each_bad_row_gets_its_diagnosis(spark: SparkSession) -> None:
    values = [GOOD, *CASES]
    raw = spark.createDataFrame(
        [(b"k", None if v is None else v.encode(), "t", 0, i, None) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )

    parsed = parse_records(raw, fixed_spec().input.fields, event_time="ts")

    good = parsed.good.collect()
    assert [(g.key, g.id, g.amount) for g in good] == [("user-1", "a-1", 1.5)]
    errors = {b.value: b.error for b in parsed.bad.collect()}
    assert errors == CASES


# Nested and optional fields: a row with every field typed skips the raw-text parse, the
# others (an optional field absent, a nested one missing or mistyped) are diagnosed from it.
NESTED_FIELDS = [
    InputField(name="device", type="string", path="meta.device"),
    InputField(name="level", type="long", path="meta.level"),
    InputField(name="score", type="double", required=False),
    InputField(name="ts", type="long"),
]
NESTED_GOOD = [
    '{"meta": {"device": "d1", "level": 3}, "score": 0.5, "ts": 1}',
    '{"meta": {"device": "d2", "level": 4}, "ts": 2}',
    '{"meta": {"device": "d3", "level": 5}, "score": null, "ts": 3}',
]
NESTED_CASES = {
    '{"meta": {"level": 1}, "score": 0.5, "ts": 4}': "missing: meta.device",
    '{"meta": 7, "ts": 5}': "missing: meta.device, meta.level",
    '{"meta": {"device": "d", "level": "high"}, "ts": 6}': "wrong type: meta.level",
    '{"meta": {"device": "d", "level": 1}, "score": "x", "ts": 7}': "wrong type: score",
    '{"meta": {"device": "d", "level": 1}, "score": NaN, "ts": 8}': "score is not finite",
    '{"meta": {"device": "d", "level": 1}, "ts": -1}': "ts out of range",
}


def test_nested_and_optional_fields_get_their_diagnosis(spark: SparkSession) -> None:
    values = [*NESTED_GOOD, *NESTED_CASES]
    raw = spark.createDataFrame(
        [(b"k", v.encode(), "t", 0, i, None) for i, v in enumerate(values)],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp",
    )

    parsed = parse_records(raw, NESTED_FIELDS, event_time="ts")

    good = parsed.good.orderBy("ts").collect()
    assert [(g.device, g.level, g.score) for g in good] == [
        ("d1", 3, 0.5),
        ("d2", 4, None),
        ("d3", 5, None),
    ]
    assert {b.value: b.error for b in parsed.bad.collect()} == NESTED_CASES


def test_every_diagnosis_is_documented() -> None:
    documented = DOCS.read_text()
    for error in set(CASES.values()):
        generic = re.sub(r"(missing|wrong type): [a-z, ]+", r"\1: ", error).split("; ")[0]
        assert f"`{generic}" in documented, error
