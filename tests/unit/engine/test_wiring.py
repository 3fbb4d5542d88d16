"""The composition builds a whole bridge from a start-up record and fakes: no Kafka client is
made, no request is sent (the I/O is app.engine.preflight's)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from app.config import BridgeSettings
from app.engine.preflight import Changelogs, Preflight
from app.engine.start import init_transactions
from app.engine.wiring import compose
from app.kafka.clients import Clients
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.pipeline import Pipeline
from app.state.manager import RocksDBState
from tests.unit.fakes import FakeConsumer, FakeMessage, FakeProducer, idle_watchdog

_CLIENTS = (confluent_kafka.Consumer, confluent_kafka.Producer, confluent_kafka.admin.AdminClient)


@pytest.fixture(autouse=True)
def no_kafka_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every name under which the service holds a confluent-kafka client class now raises."""

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the composition made a confluent_kafka client")

    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("app", "changelog", "confluent_kafka")):
            continue
        for attr, value in list(vars(module).items()):
            if any(value is client for client in _CLIENTS):
                monkeypatch.setattr(module, attr, refuse)


class FakeAdmin:
    def __init__(self) -> None:
        self.polls = 0

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0

    def list_topics(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("no topic lookup while composing")


class Rig:
    def __init__(self) -> None:
        self.consumer = FakeConsumer()
        self.producers: list[FakeProducer] = []
        self.admins: list[FakeAdmin] = []
        self.clients = Clients(consumer=self._consumer, producer=self._producer, admin=self._admin)

    def _consumer(self, conf: dict[str, Any]) -> FakeConsumer:
        assert conf["group.id"] == "g"
        return self.consumer

    def _producer(self, conf: dict[str, Any]) -> FakeProducer:
        assert conf["transactional.id"] == "g-i0"
        self.producers.append(FakeProducer())
        return self.producers[-1]

    def _admin(self, conf: dict[str, Any]) -> FakeAdmin:
        self.admins.append(FakeAdmin())
        return self.admins[-1]


def _facts(**extra: Any) -> Preflight:
    return Preflight(
        topics=frozenset({"in", "out", "dlq"}), topic_limits={"out": 1_000_000},
        keep_partition=False, target_admin=FakeAdmin(), **extra,
    )  # fmt: skip


def _settings(tmp_path: Path) -> BridgeSettings:
    return BridgeSettings(
        input_topics=["in"], output_topic="out", group_id="g", instance_id="i0", dlq_topic="dlq",
        state_dir=tmp_path / "state", http_port=0,
    )  # fmt: skip


def test_a_bridge_built_from_a_preflight_record_and_fakes_runs_exactly_once(
    tmp_path: Path,
) -> None:
    rig = Rig()
    bridge = compose(
        _settings(tmp_path), Pipeline(), _facts(), Metrics(), Health(30.0), idle_watchdog(),
        clients=rig.clients,
    )  # fmt: skip
    init_transactions(bridge.transactions, _settings(tmp_path))
    rig.consumer.positions = {("in", 0): 2}
    rig.consumer.batches = [[FakeMessage(offset=0, value=b'{"a": 1}'), FakeMessage(offset=1)]]
    rig.consumer.on_empty = lambda: setattr(bridge, "stopping", True)
    bridge.run()
    [producer] = rig.producers
    assert [topic for topic, _, _ in producer.produced] == ["out", "out"]
    assert producer.sent_offsets == [[("in", 0, 2)]]
    assert producer.calls[0] == "init_transactions"
    assert producer.calls.count("commit_transaction") == 1


def test_a_stateful_bridge_is_built_from_the_changelogs_preflight_prepared(
    tmp_path: Path,
) -> None:
    rig, admin = Rig(), FakeAdmin()
    changelogs = Changelogs({("count", "in"): "changelog__g--in--count"}, admin)
    bridge = compose(
        _settings(tmp_path), Pipeline().count(), _facts(changelogs=changelogs), Metrics(),
        Health(30.0), idle_watchdog(), clients=rig.clients,
    )  # fmt: skip
    state = bridge._state
    assert isinstance(state, RocksDBState)
    assert admin.polls == 1  # the start-up requests' log lines, handed over
    assert rig.admins == []  # a second admin only when a settling error outlasts the first
    bridge.close_state()


def test_a_two_cluster_bridge_is_built_without_a_kafka_client(tmp_path: Path) -> None:
    """Two clusters: the offsets topic's reader and lister too come from the composition's
    makers, and no task producer exists before an assignment."""
    made: list[str] = []

    def consumer(conf: dict[str, Any]) -> FakeConsumer:
        made.append(str(conf["group.id"]))
        return FakeConsumer()

    def producer(conf: dict[str, Any]) -> FakeProducer:
        raise AssertionError("a task producer before any assignment")

    settings = BridgeSettings(
        input_topics=["in"], output_topic="out", group_id="g", instance_id="i0",
        target={"bootstrap_servers": "other:9092"}, http_port=0,
    )  # fmt: skip
    bridge = compose(
        settings, Pipeline(), _facts(), Metrics(), Health(30.0), idle_watchdog(),
        clients=Clients(consumer=consumer, producer=producer, admin=FakeAdmin),
    )  # fmt: skip
    init_transactions(bridge.transactions, settings)  # the task producers': on assignment
    assert made == ["g", "g.offsets-reader", "g.offsets-lister"]
