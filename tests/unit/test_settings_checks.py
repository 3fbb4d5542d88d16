"""Every setting mistake is one line naming the key the user wrote (app.settings_checks):
librdkafka values librdkafka refuses, out-of-range timeouts, an unusable state_dir, YAML
errors, topics that would loop, and messages cut to a readable length."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_settings
from app.errors import ConfigError
from app.pipeline.spec import load_spec

BASE = {"input_topics": ["in"], "output_topic": "out"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("BRIDGE_"):
            monkeypatch.delenv(key)


def refused(**settings: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(**{**BASE, **settings})
    text = str(info.value)
    assert "Traceback" not in text
    return text


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"producer": {"linger.ms": "abc"}}, "producer.linger.ms (BRIDGE_PRODUCER)"),
        ({"consumer": {"fetch.max.bytes": 1}}, "consumer.fetch.max.bytes (BRIDGE_CONSUMER)"),
        ({"producer": {"linger.ms": 5, "no.such.key": 1}}, "producer.no.such.key"),
        # refused only with what the bridge forces (idempotence, the transaction timeout)
        ({"producer": {"max.in.flight.requests.per.connection": 10}}, "producer.max.in.flight"),
        ({"producer": {"message.timeout.ms": 100_000}}, "producer.message.timeout.ms"),
    ],
)
def test_a_value_librdkafka_refuses_names_the_key_as_written(
    settings: dict[str, Any], named: str
) -> None:
    text = refused(**settings)
    assert named in text
    assert "queue.buffering.max.ms (" not in text  # librdkafka's alias is no setting of ours


def test_values_librdkafka_takes_pass() -> None:
    s = load_settings(**BASE, producer={"linger.ms": 20}, consumer={"fetch.max.bytes": 2**26})
    assert s.producer == {"linger.ms": 20}


def test_a_refused_secret_is_not_echoed() -> None:
    text = refused(producer={"sasl.password": "s3cret", "linger.ms": "abc"})
    assert "s3cret" not in text


@pytest.mark.parametrize("name", ["startup_timeout", "shutdown_timeout"])
def test_a_timeout_over_an_hour_is_refused(name: str) -> None:
    assert f"{name} (BRIDGE_{name.upper()}): Input should be less than or equal to 3600" in (
        refused(**{name: 3601})
    )


def test_a_state_dir_under_a_regular_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    text = refused(state_dir=tmp_path / "file" / "state")
    assert "state_dir (BRIDGE_STATE_DIR)" in text
    assert "is not a directory" in text


def test_a_dlq_topic_that_is_an_input_topic_is_refused() -> None:
    text = refused(dlq_topic="in")
    assert "dlq_topic (BRIDGE_DLQ_TOPIC) 'in' is also an input topic" in text


def test_a_dlq_topic_of_another_cluster_may_share_an_input_name() -> None:
    s = load_settings(**BASE, dlq_topic="in", target={"bootstrap_servers": "other:9092"})
    assert s.dead_letter_topic == "in"


def test_a_yaml_error_in_the_config_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text("input_topics: [in]\noutput_topic: out\n\tbad: 1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    text = str(info.value)
    assert "\n" not in text
    assert f"{config}:3:1: not valid YAML" in text


def test_a_yaml_error_in_a_spec_is_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text('steps:\n\t- filter: "amount > 1"\n')
    with pytest.raises(ConfigError) as info:
        load_spec(spec)
    text = str(info.value)
    assert "\n" not in text
    assert f"pipeline_spec {spec}:2:1: not valid YAML" in text


def test_a_huge_literal_is_not_echoed_whole(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"steps": [{"filter": "'" + "x" * 1_000_000 + "' =="}]}))
    with pytest.raises(ConfigError) as info:
        load_spec(spec)
    text = str(info.value)
    assert "steps[0].filter" in text
    assert len(text) < 1200
    assert "characters cut" in text
