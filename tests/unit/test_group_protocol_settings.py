"""group_protocol: the consumer's group.protocol, and the classic keys refused under KIP-848."""

from __future__ import annotations

import pytest

from app.config import BridgeSettings
from app.kafka.defaults import consumer_config

BASE = {"input_topics": ["in"], "output_topic": "out"}


def test_the_protocol_reaches_the_consumer_and_defaults_to_consumer() -> None:
    assert BridgeSettings(**BASE).group_protocol == "consumer"  # type: ignore[arg-type]
    conf = consumer_config("b", "g", None, {}, {}, "consumer")
    assert conf["group.protocol"] == "consumer" and conf["group.remote.assignor"] == "range"
    assert "group.remote.assignor" not in consumer_config("b", "g", None, {}, {}, "classic")
    chosen = consumer_config("b", "g", None, {}, {"group.remote.assignor": "uniform"}, "consumer")
    assert chosen["group.remote.assignor"] == "uniform"  # the user's choice wins


@pytest.mark.parametrize(
    ("key", "replacement"),
    [
        ("session.timeout.ms", "group.consumer.session.timeout.ms"),
        ("heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms"),
        ("partition.assignment.strategy", "group.consumer.assignors"),
    ],
)
def test_a_classic_key_under_the_consumer_protocol_is_refused_naming_its_replacement(
    key: str, replacement: str
) -> None:
    with pytest.raises(ValueError, match=rf"consumer\.{key}.*{replacement}"):
        BridgeSettings(**BASE, group_protocol="consumer", consumer={key: "6000"})  # type: ignore[arg-type]


def test_group_protocol_is_set_by_its_setting_not_by_the_consumer_map() -> None:
    with pytest.raises(ValueError, match=r"group\.protocol"):
        BridgeSettings(**BASE, consumer={"group.protocol": "consumer"})  # type: ignore[arg-type]
