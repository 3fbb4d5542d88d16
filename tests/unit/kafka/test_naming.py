"""Output topic naming and kept partitions (app.kafka.naming): a bad template is one line; a
partition mismatch with keep_partition=true is one line per topic (exit 2). The settings that
use them: tests/unit/test_config.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from app.engine.preflight import _keep_partition
from app.errors import ConfigError
from app.kafka.naming import (
    check_template,
    keeps_partition,
    output_topics,
    partition_mismatches,
    render,
)
from app.pipeline.builder import Pipeline


def test_same_name_prefix_and_template() -> None:
    assert render("{topic}", "orders") == "orders"
    assert render("source.{topic}", "orders") == "source.orders"
    assert render("eu.{topic}.copy", "orders") == "eu.orders.copy"
    assert render("plain-out", "orders") == "plain-out"  # no field: one topic for all
    assert output_topics("src.{topic}", ["a", "b"]) == {"a": "src.a", "b": "src.b"}


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("eu.{topc}", "has {topc}; the only field is {topic}"),
        ("{topic!r}", "has {topic!r}; the only field is {topic}"),
        ("{topic:>9}", "has {topic:>9}; the only field is {topic}"),
        ("{}", "has {}; the only field is {topic}"),
        ("eu.{topic", "template 'eu.{topic': expected '}' before end of string"),
        ("eu/{topic}", "makes 'eu/orders' of input topic 'orders': not a legal topic name"),
    ],
)
def test_a_bad_template_is_refused_in_one_line(template: str, says: str) -> None:
    with pytest.raises(ValueError) as info:
        check_template(template, ["orders"])
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_mismatches_are_one_line_per_topic() -> None:
    outputs = {"a": "x.a", "b": "x.b", "c": "x.c"}
    lines = partition_mismatches(outputs, {"a": 4, "b": 2, "c": 3}, {"x.a": 4, "x.b": 6, "x.c": 1})
    assert lines == [
        "input topic 'b' has 2 partitions, its output topic 'x.b' has 6",
        "input topic 'c' has 3 partitions, its output topic 'x.c' has 1",
    ]


def test_auto_keeps_only_when_every_count_matches_and_true_refuses_a_mismatch() -> None:
    assert keeps_partition("auto", []) is True
    assert keeps_partition("auto", ["a mismatch"]) is False
    assert keeps_partition(False, []) is False
    assert keeps_partition(True, []) is True
    with pytest.raises(ConfigError) as info:
        keeps_partition(True, ["input topic 'b' has 2 partitions, its output topic 'x' has 6"])
    (line,) = str(info.value).splitlines()
    assert line.startswith("keep_partition=true (BRIDGE_KEEP_PARTITION): input topic 'b' has 2")


class _Admin:
    """list_topics() of a cluster with the given partition counts."""

    def __init__(self, **counts: int) -> None:
        self._topics = {
            t.replace("_", "."): SimpleNamespace(partitions=dict.fromkeys(range(n)))
            for t, n in counts.items()
        }

    def list_topics(self, timeout: float = -1) -> Any:
        return SimpleNamespace(topics=self._topics)


@pytest.mark.parametrize(
    ("setting", "pipeline", "out_partitions", "kept"),
    [
        ("auto", Pipeline(), 4, True),
        ("auto", Pipeline(), 2, False),
        ("auto", Pipeline().key_by(lambda v: v["user"]), 4, False),  # placed by its new key
        (True, Pipeline().key_by(lambda v: v["user"]), 4, True),  # as the user says
        (False, Pipeline(), 4, False),
    ],
)
def test_auto_keeps_partitions_when_counts_match_and_no_step_rekeys(
    setting: Any, pipeline: Pipeline, out_partitions: int, kept: bool
) -> None:
    settings = SimpleNamespace(
        keep_partition=setting, output_topics={"a": "x.a"}, startup_timeout=1.0
    )
    source, target = _Admin(a=4), _Admin(x_a=out_partitions)
    assert _keep_partition(settings, pipeline, source, target) is kept  # type: ignore[arg-type]
