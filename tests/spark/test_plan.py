"""The compiled plan on a static DataFrame (no Kafka): the Python form, and expressions checked
by Spark's parser before any data is read."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from spark_jobs.errors import JobConfigError
from spark_jobs.plan import AggregationPlan
from spark_jobs.spec import parse_spec

SPEC = {
    "input": {
        "fields": [
            {"name": "user", "type": "string", "path": "who.name"},
            {"name": "amount", "type": "double"},
        ]
    },
    "python": "tests.spark.transforms:biggest_per_user",
    "output": {"merge_keys": ["user"]},
}
RAW = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"


def _raw(spark: SparkSession, docs: list[object]) -> object:
    rows = [(b"k", json.dumps(d).encode(), "t", 0, i, None) for i, d in enumerate(docs)]
    return spark.createDataFrame(rows, RAW)


def test_the_python_form_runs_over_typed_records(spark: SparkSession) -> None:
    plan = AggregationPlan.compile(parse_spec(SPEC))
    docs = [
        {"who": {"name": "ana"}, "amount": 3.0},
        {"who": {"name": "ana"}, "amount": 5.5},
        {"who": {"name": "bo"}, "amount": 1.0},
        {"who": "nobody", "amount": 2.0},  # nested path missing: a bad row
    ]
    parsed, rows = plan.rows(_raw(spark, docs), streaming=False)  # type: ignore[arg-type]
    got = {r.user: (r.biggest, r.n) for r in rows.collect()}
    assert got == {"ana": (5.5, 2), "bo": (1.0, 1)}
    assert [b.error for b in parsed.bad.collect()] == ["missing: who.name"]
    assert plan.output_schema(spark).fieldNames() == ["user", "biggest", "n"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"python": "tests.spark.transforms:absent"}, "has no function absent"),
        ({"python": "tests.spark.nowhere:f"}, "cannot import tests.spark.nowhere"),
        ({"python": "tests.spark.transforms:not_a_frame"}, "returned int, not a DataFrame"),
        ({"output": {"merge_keys": ["who"]}}, "output.merge_keys: who not among"),
    ],
)
def test_python_form_mistakes_are_one_line(
    spark: SparkSession, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(JobConfigError, match=message) as refused:
        AggregationPlan.compile(parse_spec({**SPEC, **changes})).output_schema(spark)
    assert "\n" not in str(refused.value)


def test_expressions_are_checked_by_spark_naming_the_step(spark: SparkSession) -> None:
    spec = {
        **{k: v for k, v in SPEC.items() if k != "python"},
        "derive": [{"name": "gross", "expr": "amount * tax"}],
        "group_by": ["user"],
        "aggregates": [{"name": "g", "fn": "sum", "column": "gross"}],
        "output": {},
    }
    with pytest.raises(JobConfigError, match=r"spec derive\.gross: \[UNRESOLVED_COLUMN") as bad:
        AggregationPlan.compile(parse_spec(spec)).output_schema(spark)
    assert "\n" not in str(bad.value)
    spec["derive"] = [{"name": "gross", "expr": "amount * (("}]
    with pytest.raises(JobConfigError, match=r"spec derive\.gross: \[PARSE_SYNTAX_ERROR"):
        AggregationPlan.compile(parse_spec(spec)).output_schema(spark)
