"""Where a pipeline is cut for regrouping (app.pipeline.split)."""

from __future__ import annotations

import pytest

from app.errors import ConfigError
from app.pipeline import Pipeline
from app.pipeline.spec import compile_spec
from app.pipeline.split import repartition_topic_name, split


def _spec(*steps: object) -> Pipeline:
    return compile_spec({"steps": list(steps)}, "p.yaml")


def test_key_by_before_a_stateful_step_cuts_after_the_key_by() -> None:
    p = _spec({"filter": "amount > 0"}, {"key_by": "region"}, "count", {"set": {"x": "1"}})
    plan = split(p.steps, "g")
    assert plan is not None
    assert [s.name for s in plan.head] == ["p.yaml steps[0].filter", "p.yaml steps[1].key_by"]
    assert [s.name for s in plan.tail] == ["count", "p.yaml steps[3].set"]
    assert plan.topic == "g-key_by-1-repartition" and plan.by is None


def test_the_last_re_key_before_the_stateful_step_names_the_cut() -> None:
    p = Pipeline().key_by(lambda v: v["a"]).key_by(lambda v: v["b"]).count()
    plan = split(p.steps, "grp")
    assert plan is not None and len(plan.head) == 2 and plan.topic == "grp-key_by-repartition"


def test_no_cut_without_state_without_re_key_or_when_told() -> None:
    assert split(Pipeline().key_by(lambda v: v["a"]).steps, "g") is None  # stateless
    assert split(Pipeline().count().steps, "g") is None  # by the input key
    assert split(Pipeline().count().key_by(lambda v: v["a"]).steps, "g") is None  # after
    told = Pipeline().key_by(lambda v: v["a"], repartition=False).count()
    assert split(told.steps, "g") is None
    assert (
        split(_spec({"key_by": {"by": "region", "repartition": False}}, "count").steps, "g") is None
    )


def test_dedupe_by_a_field_is_regrouped_by_that_field() -> None:
    plan = split(_spec({"dedupe": {"by": "uid", "name": "seen"}}).steps, "g")
    assert plan is not None and plan.head == [] and plan.topic == "g-seen-repartition"
    assert plan.by is not None
    assert split(_spec({"dedupe": {"name": "seen"}}).steps, "g") is None  # by the key
    told = _spec({"dedupe": {"by": "uid", "repartition": False}})
    assert split(told.steps, "g") is None


def test_topic_names_hold_only_legal_characters() -> None:
    assert repartition_topic_name("g", "my step/1") == "g-my_step_1-repartition"


def test_an_unknown_key_by_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        _spec({"key_by": {"by": "region", "shards": 3}}, "count")


def test_the_partitions_option_sets_the_topics_count() -> None:
    plan = split(_spec({"key_by": {"by": "region", "partitions": 6}}, "count").steps, "g")
    assert plan is not None and plan.partitions == 6
    plan = split(_spec({"dedupe": {"by": "uid", "partitions": 2}}).steps, "g")
    assert plan is not None and plan.partitions == 2
    python = Pipeline().key_by(lambda v: v["a"], partitions=5).count()
    assert (plan := split(python.steps, "g")) is not None and plan.partitions == 5
    assert (plan := split(_spec({"key_by": "region"}, "count").steps, "g")) is not None
    assert plan.partitions is None  # the inputs' largest count, at start
    with pytest.raises(ConfigError, match="partitions must be a positive integer"):
        split(_spec({"key_by": {"by": "region", "partitions": 0}}, "count").steps, "g")
