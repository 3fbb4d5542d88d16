"""Output topic naming and kept partitions (app.kafka.naming), and the settings that use them:
a bad template is one line naming the setting; a partition mismatch with keep_partition=true
is one line per topic (exit 2)."""

from __future__ import annotations

import os

import pytest

from app.config import load_settings
from app.errors import ConfigError
from app.kafka.naming import (
    check_template,
    keeps_partition,
    output_topics,
    partition_mismatches,
    render,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("BRIDGE_"):
            monkeypatch.delenv(key)


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


def test_the_settings_name_the_setting_of_a_bad_template() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(input_topics=["a"], output_topic="x.{name}")
    (line,) = str(info.value).splitlines()[1:]
    assert line.startswith("  - output_topic (BRIDGE_OUTPUT_TOPIC): template 'x.{name}' has")


def test_a_template_names_each_inputs_output_and_the_dead_letters_after_the_group() -> None:
    s = load_settings(input_topics=["a", "b"], output_topic="eu.{topic}", group_id="g")
    assert s.output_topics == {"a": "eu.a", "b": "eu.b"}
    assert s.dead_letter_topic == "g.dlq"
    assert s.keep_partition == "auto"
    plain = load_settings(input_topics=["a", "b"], output_topic="out")
    assert plain.output_topics == {"a": "out", "b": "out"}
    assert plain.dead_letter_topic == "out.dlq"


def test_same_names_on_one_cluster_would_read_their_own_output() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(input_topics=["a"], output_topic="{topic}")
    assert "output_topic '{topic}': 'a' is also an input topic" in str(info.value)
    across = load_settings(
        input_topics=["a"], output_topic="{topic}", target={"bootstrap_servers": "other:9092"}
    )
    assert across.output_topics == {"a": "a"}


@pytest.mark.parametrize(("value", "parsed"), [("auto", "auto"), ("true", True), ("false", False)])
def test_keep_partition_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, parsed: object
) -> None:
    monkeypatch.setenv("BRIDGE_KEEP_PARTITION", value)
    assert load_settings(input_topics=["a"], output_topic="b").keep_partition == parsed
    monkeypatch.setenv("BRIDGE_KEEP_PARTITION", "sometimes")
    with pytest.raises(ConfigError, match="keep_partition"):
        load_settings(input_topics=["a"], output_topic="b")


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
