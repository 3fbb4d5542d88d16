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


def test_every_diagnosis_is_documented() -> None:
    documented = DOCS.read_text()
    for error in set(CASES.values()):
        generic = re.sub(r"(missing|wrong type): [a-z, ]+", r"\1: ", error).split("; ")[0]
        assert f"`{generic}" in documented, error
