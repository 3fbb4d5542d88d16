"""The aggregation spec: what it accepts, and one-line refusals that name the field.

Pure validation, no Spark: the plan compiler (tests/spark) checks expressions with Spark's own
parser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_jobs.errors import JobConfigError
from spark_jobs.evolution import added_columns
from spark_jobs.fixed import fixed_spec
from spark_jobs.spec import AggregationSpec, interval_micros, load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "spark"


def _spec(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "input": {
            "topics": ["out"],
            "fields": [
                {"name": "user", "type": "string", "path": "who.name"},
                {"name": "amount", "type": "double"},
                {"name": "ts", "type": "long"},
            ],
        },
        "derive": [{"name": "gross", "expr": "amount * 1.2"}],
        "event_time": {"column": "ts", "watermark": "5 minutes"},
        "group_by": ["user"],
        "window": {"type": "hopping", "size": "5 minutes", "slide": "1 minute"},
        "aggregates": [
            {"name": "n", "fn": "count"},
            {"name": "avg_gross", "fn": "avg", "column": "gross"},
            {"name": "amount", "fn": "percentile", "column": "amount", "percentiles": [0.5, 0.999]},
        ],
    }
    doc.update(changes)
    return doc


def test_a_spec_names_its_output_columns_and_merge_keys() -> None:
    spec = parse_spec(_spec())
    assert spec.output_columns() == [
        "user", "window_start", "window_end", "n", "avg_gross", "amount_p50", "amount_p99_9",
    ]  # fmt: skip
    assert spec.merge_keys == ["user", "window_start"]
    assert spec.input.fields[0].json_path == "who.name"


@pytest.mark.parametrize(
    "name", ["fixed.yaml", "sliding-average.yaml", "sessions.yaml", "totals-to-kafka.yaml"]
)
def test_example_specs_load(name: str) -> None:
    assert isinstance(load_spec(str(EXAMPLES / name)), AggregationSpec)


def test_the_fixed_example_is_the_default_job() -> None:
    example = load_spec(str(EXAMPLES / "fixed.yaml"))
    assert example.shape() == fixed_spec().shape()
    assert example.output_columns() == fixed_spec().output_columns()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"group_by": ["usr"]}, "group_by: unknown column 'usr'; known: user, amount, ts, gross"),
        (
            {"aggregates": [{"name": "m", "fn": "median", "column": "amount"}]},
            "aggregates.0.fn: unknown aggregate 'median'",
        ),
        (
            {"aggregates": [{"name": "m", "fn": "sum", "column": "amt"}]},
            "aggregates.m.column: unknown column 'amt'",
        ),
        (
            {"window": {"type": "tumbling", "size": "5 minutez"}},
            'window.size: "5 minutez" is not an interval',
        ),
        ({"window": {"type": "hopping", "size": "5 minutes"}}, "takes size and slide"),
        (
            {"output": {"merge_keys": ["window_start"]}},
            "output.merge_keys misses user: the merge keys are the group-by columns",
        ),
        ({"event_time": {"column": "user"}}, "must be a declared field of type long"),
        ({"event_time": None}, "a window needs event_time"),
        ({"group_by": [], "window": None}, "nothing to merge rows on"),
        (
            {"aggregates": [{"name": "p", "fn": "percentile", "column": "amount"}]},
            "percentile needs percentiles",
        ),
        ({"derive": [{"name": "window_start", "expr": "1"}]}, "reserved"),
        ({"filtr": "amount > 0"}, "filtr: Extra inputs are not permitted"),
        ({"output": {"kafka": {"topic": "a b"}}}, "output.kafka.topic: 'a b' is not a Kafka topic"),
        ({"output": {"kafka": {"topic": "r", "transactional_id": " "}}}, "must not be empty"),
        ({"output": {"kafka": {"topc": "r"}}}, "output.kafka.topic: Field required"),
    ],
)
def test_spec_mistakes_are_one_line_naming_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(JobConfigError) as refused:
        parse_spec(_spec(**changes), "--spec s.yaml")
    text = str(refused.value)
    assert text.startswith("--spec s.yaml: ")
    assert message in text
    assert "\n" not in text


def test_bad_records_are_kept_unless_the_spec_turns_them_off() -> None:
    assert parse_spec(_spec()).bad_records is True
    off = parse_spec(_spec(bad_records=False))
    assert off.bad_records is False
    assert off.shape() == parse_spec(_spec()).shape()  # same table rows, same checkpoint
    assert load_spec_text("bad_records: false") is False
    with pytest.raises(JobConfigError, match=r"^--spec s\.yaml: bad_records: Input should be"):
        parse_spec(_spec(bad_records="drop"), "--spec s.yaml")


def load_spec_text(line: str) -> bool:
    """``bad_records`` of the test spec as YAML with ``line`` appended."""
    return parse_spec(yaml.safe_load(yaml.safe_dump(_spec()) + line + "\n")).bad_records


def test_a_python_form_needs_merge_keys_and_no_aggregates() -> None:
    spec = parse_spec(
        _spec(aggregates=[], python="mod:fn", output={"merge_keys": ["user", "window_start"]})
    )
    assert spec.python == "mod:fn"
    with pytest.raises(JobConfigError, match=r"output\.merge_keys: required with python"):
        parse_spec(_spec(aggregates=[], python="mod:fn"))


def test_a_spec_file_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("input: [unclosed\n")
    with pytest.raises(JobConfigError, match=r"--spec .*s.yaml: not valid YAML/JSON") as refused:
        load_spec(str(bad))
    assert "\n" not in str(refused.value)
    with pytest.raises(JobConfigError, match="cannot read it"):
        load_spec(str(tmp_path / "absent.yaml"))


def test_intervals_in_microseconds() -> None:
    assert interval_micros("30 seconds") == 30_000_000
    assert interval_micros("1 minute") == 60_000_000
    assert interval_micros("2 hours") == 7_200_000_000


def _shape(spec: AggregationSpec, **columns: str) -> dict[str, Any]:
    return {**spec.shape(), "columns": columns}


def test_evolution_adds_new_aggregate_columns_and_keeps_dropped_ones() -> None:
    old = parse_spec(_spec())
    new_doc = _spec()
    new_doc["aggregates"] = [
        *new_doc["aggregates"][1:],
        {"name": "top", "fn": "max", "column": "amount"},
    ]
    new = parse_spec(new_doc)
    added = added_columns("/t", _shape(old, n="bigint"), _shape(new, top="double"))
    assert added == {"top": "double"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group_by": []}, "removes merge key 'user'"),
        ({"window": {"type": "tumbling", "size": "5 minutes"}}, "was created with window"),
        (
            {"aggregates": [{"name": "n", "fn": "count", "column": "amount"}]},
            "aggregate 'n' was",
        ),
    ],
)
def test_evolution_refuses_what_changes_the_meaning_of_rows(
    change: dict[str, Any], message: str
) -> None:
    old = parse_spec(_spec())
    new = parse_spec(_spec(**change))
    with pytest.raises(JobConfigError, match=message) as refused:
        added_columns("/t", _shape(old), _shape(new))
    assert "\n" not in str(refused.value)


def test_evolution_refuses_a_changed_column_type() -> None:
    spec = parse_spec(_spec())
    with pytest.raises(JobConfigError, match="column 'n' is bigint in the table"):
        added_columns("/t", _shape(spec, n="bigint"), _shape(spec, n="double"))


def test_specs_round_trip_through_yaml() -> None:
    spec = parse_spec(_spec())
    assert parse_spec(yaml.safe_load(yaml.safe_dump(spec.model_dump()))) == spec


def test_the_spec_in_the_docs_is_valid() -> None:
    docs = (EXAMPLES.parents[1] / "docs" / "spark.md").read_text()
    block = docs.split("```yaml\n", 1)[1].split("```", 1)[0]
    spec = parse_spec(yaml.safe_load(block))
    assert spec.merge_keys == ["region", "currency", "window_start"]


def test_a_checkpoint_refuses_another_specs_state(tmp_path: Path) -> None:
    from spark_jobs.checkpoints import claim_checkpoint

    spec = parse_spec(_spec())
    claim_checkpoint(str(tmp_path / "ck"), spec.shape())
    claim_checkpoint(str(tmp_path / "ck"), spec.shape())  # the same spec: fine
    other = parse_spec(_spec(group_by=["user", "ts"]))
    with pytest.raises(JobConfigError, match="holds the state of another spec") as refused:
        claim_checkpoint(str(tmp_path / "ck"), other.shape())
    assert "\n" not in str(refused.value)
