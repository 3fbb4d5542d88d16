"""Config validation: one readable line per problem, naming the setting and its env var."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.config import load_settings
from app.errors import ConfigError
from app.kafka.defaults import FORCED_CONSUMER_KEYS, FORCED_PRODUCER_KEYS, FORCED_REASONS

BASE = {"input_topics": ["in"], "output_topic": "out"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("BRIDGE_"):
            monkeypatch.delenv(key)


def test_defaults_are_exactly_once_with_stable_transactional_id() -> None:
    s = load_settings(**BASE, instance_id="bridge-2", group_id="payments")
    assert s.exactly_once
    assert s.transactional_id == "payments-bridge-2"
    assert s.dead_letter_topic == "out.dlq"


def test_commit_interval_must_stay_below_transaction_timeout() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(**BASE, commit_interval=30, transaction_timeout_ms=60_000)
    assert "commit_interval (30.0s) must stay well below transaction_timeout_ms" in str(info.value)
    assert "BRIDGE_COMMIT_INTERVAL" in str(info.value)


def test_missing_required_setting_names_env_var() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(input_topics=["in"])
    assert "output_topic (BRIDGE_OUTPUT_TOPIC): Field required" in str(info.value)


def test_forced_librdkafka_key_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(**BASE, consumer={"isolation.level": "read_uncommitted"})
    assert "consumer.isolation.level is set by the bridge itself (read_committed: " in str(
        info.value
    )


def test_every_forced_key_has_its_reason() -> None:
    """The refusal of a forced key says why it is forced, for every key the bridge forces."""
    assert set(FORCED_REASONS) == FORCED_CONSUMER_KEYS | FORCED_PRODUCER_KEYS
    for section, forced in (("consumer", FORCED_CONSUMER_KEYS), ("producer", FORCED_PRODUCER_KEYS)):
        for key in forced:
            with pytest.raises(ConfigError) as info:
                load_settings(**BASE, **{section: {key: "x"}})
            assert f"{section}.{key} is set by the bridge itself ({FORCED_REASONS[key]})" in str(
                info.value
            )


def test_env_topics_json_or_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRIDGE_OUTPUT_TOPIC", "out")
    monkeypatch.setenv("BRIDGE_INPUT_TOPICS", "a, b")
    assert load_settings().input_topics == ["a", "b"]
    monkeypatch.setenv("BRIDGE_INPUT_TOPICS", '["x","y"]')
    assert load_settings().input_topics == ["x", "y"]


def test_malformed_env_json_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRIDGE_KAFKA", "{bad")
    with pytest.raises(ConfigError, match='error parsing value for field "kafka"'):
        load_settings(**BASE)


def test_yaml_file_and_env_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bridge.yaml"
    path.write_text("input_topics: [in]\noutput_topic: out\ncommit_interval: 2\n")
    monkeypatch.setenv("BRIDGE_COMMIT_INTERVAL", "0.5")
    monkeypatch.delenv("BRIDGE_CONFIG_FILE", raising=False)
    s = load_settings(config_file=path)
    assert s.output_topic == "out"
    assert s.commit_interval == 0.5  # env wins over the file
    assert "BRIDGE_CONFIG_FILE" not in os.environ  # --config does not leak into the process


def test_config_flag_wins_over_env_file_and_env_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flagged, from_env = tmp_path / "flag.yaml", tmp_path / "env.yaml"
    flagged.write_text("input_topics: [in]\noutput_topic: flagged\n")
    from_env.write_text("input_topics: [in]\noutput_topic: from-env\n")
    monkeypatch.setenv("BRIDGE_CONFIG_FILE", str(from_env))
    assert load_settings(config_file=flagged).output_topic == "flagged"
    assert os.environ["BRIDGE_CONFIG_FILE"] == str(from_env)
    assert load_settings().output_topic == "from-env"


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(config_file=tmp_path / "nope.yaml")


def test_secrets_are_masked_and_passed_to_clients() -> None:
    s = load_settings(
        **BASE,
        sasl_username="svc",
        sasl_password="hunter2",
        kafka={"security.protocol": "SASL_SSL", "ssl.key.password": "pem-secret"},
    )
    shown = str(s.masked())
    assert "hunter2" not in shown and "pem-secret" not in shown
    assert s.client_common()["sasl.password"] == "hunter2"
    assert s.client_common()["security.protocol"] == "SASL_SSL"


@pytest.mark.parametrize(
    "key",
    [
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.client.secret",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "sasl.jaas.config",
    ],
)
def test_every_key_that_can_carry_a_secret_is_masked(key: str) -> None:
    s = load_settings(**BASE, kafka={key: "s3cret-value"})
    assert "s3cret-value" not in str(s.masked())


def test_dead_letter_ratio_settings() -> None:
    s = load_settings(**BASE)
    assert s.max_dead_letter_ratio is None and s.dead_letter_ratio_window == 60
    s = load_settings(**BASE, max_dead_letter_ratio=0.5, dead_letter_ratio_window=300)
    assert s.max_dead_letter_ratio == 0.5
    for bad in (1, 1.5, -0.1):
        with pytest.raises(ConfigError) as info:
            load_settings(**BASE, max_dead_letter_ratio=bad)
        assert "max_dead_letter_ratio (BRIDGE_MAX_DEAD_LETTER_RATIO)" in str(info.value)
    with pytest.raises(ConfigError, match="BRIDGE_DEAD_LETTER_RATIO_WINDOW"):
        load_settings(**BASE, dead_letter_ratio_window=0)


def test_the_target_cluster_defaults_to_the_source_and_its_secrets_are_masked() -> None:
    from app.config import load_settings

    one = load_settings(input_topics=["in"], output_topic="out", bootstrap_servers="a:1")
    assert one.target_cluster() == one.source() and not one.cross_cluster
    two = load_settings(
        input_topics=["in"], output_topic="in", bootstrap_servers="a:1",
        processing_guarantee="at-least-once",
        target={"bootstrap_servers": "b:1", "sasl_password": "s3cret",
                "kafka": {"ssl.key.password": "k3y"}},
    )  # fmt: skip
    assert two.cross_cluster and two.target_cluster().bootstrap_servers == "b:1"
    assert "s3cret" not in str(two.masked()) and "k3y" not in str(two.masked())
    assert two.target_cluster().client_common()["sasl.password"] == "s3cret"


# ---- output_topic as a template, keep_partition (app.kafka.naming) ----


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
