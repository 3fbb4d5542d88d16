"""Shared fixtures: a real Kafka broker and a real Schema Registry for the whole session,
started by our own launchers (each only when a test asks for it).

Set ``KAFKA_BOOTSTRAP`` to run the integration tests against a broker of your own instead
(it needs ``auto.create.topics.enable=false`` semantics only for the misconfiguration tests),
and ``SCHEMA_REGISTRY_URL`` (a Confluent-compatible API, BACKWARD compatibility) for a registry
of your own (the tests that stop or add registries still start their own).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import settings

from devkit.kafka import LocalKafka
from tests.support import prefetch
from tests.support.chaos import heal_brokers
from tests.support.kafka import TEST_BROKER_GROUPS, KafkaFixture
from tests.support.registry import RegistryFixture, start_registry

# No per-example deadline: a busy machine must not fail a property test (a test's outcome never
# depends on how fast the machine is).
settings.register_profile("eos-bridge", deadline=None)
settings.load_profile("eos-bridge")


_prefetch: list[subprocess.Popen[bytes]] = []  # the background tool builds of this session, if any


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run with chart, image or fault tests builds the pinned tools in the background
    (tests/support/prefetch.py)."""
    if prefetch.wanted(session.items):
        _prefetch.append(prefetch.start(Path(session.config.rootpath) / ".pytest-prefetch.log"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for proc in _prefetch:
        prefetch.stop(proc)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks Quix Streams (the ``quix`` fixture: a process in .venv-quix) is marked
    ``quix``, so ``make unit`` can run without that virtualenv (``-m "not quix"``)."""
    for item in items:
        if "quix" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.quix)


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka | None]:
    """The session's broker (None when KAFKA_BOOTSTRAP points at an external one)."""
    if os.environ.get("KAFKA_BOOTSTRAP"):
        yield None
        return
    cluster = LocalKafka(tmp_path_factory.mktemp("kafka"), brokers=1, overrides=TEST_BROKER_GROUPS)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka(kafka_cluster: LocalKafka | None) -> KafkaFixture:
    """Factories for unique topics and groups, seeding and read-to-end on the session broker."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP") or (kafka_cluster and kafka_cluster.bootstrap)
    assert bootstrap
    return KafkaFixture(bootstrap)


@pytest.fixture(scope="session")
def _cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    cluster = LocalKafka(
        tmp_path_factory.mktemp("kafka3"), brokers=3, heap="512m", overrides=TEST_BROKER_GROUPS
    )
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster3(_cluster3: LocalKafka, request: pytest.FixtureRequest) -> Iterator[LocalKafka]:
    """A 3-broker cluster (RF 3, min ISR 2) for fault tests (not the chaos rig's: no proxies),
    started once per session (about a minute on two cores); after each test every broker is
    running again and every partition in sync on all three, or, after the session's last test
    that uses it, the cluster is stopped (its three JVMs are not kept through the Spark tests)."""
    yield _cluster3
    items = request.session.items
    later = items[items.index(request.node) + 1 :] if request.node in items else []
    if any("cluster3" in getattr(item, "fixturenames", ()) for item in later):
        admin = AdminClient({"bootstrap.servers": _cluster3.bootstrap, "log_level": 0})
        heal_brokers(_cluster3, admin, timeout=180)
    else:
        _cluster3.stop()


@pytest.fixture(scope="session")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker with SASL_SSL (SCRAM), mTLS and ACLs (devkit.kafka.security); the admin's
    PLAINTEXT listener is ``.bootstrap``."""
    cluster = LocalKafka(
        tmp_path_factory.mktemp("secure-kafka"),
        secure=True,
        heap="512m",
        overrides=TEST_BROKER_GROUPS,
    )
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def target_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFixture]:
    """A second, independent cluster (the target of cross-cluster tests), started on first
    use and shared by the session."""
    cluster = LocalKafka(
        tmp_path_factory.mktemp("kafka-target"), brokers=1, overrides=TEST_BROKER_GROUPS
    )
    cluster.start()
    try:
        yield KafkaFixture(cluster.bootstrap)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryFixture]:
    """The session's Schema Registry (Apicurio, devkit.registry), compatibility BACKWARD."""
    if os.environ.get("SCHEMA_REGISTRY_URL"):
        yield RegistryFixture(os.environ["SCHEMA_REGISTRY_URL"])
        return
    started = start_registry(tmp_path_factory.mktemp("registry"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def make_registry(tmp_path: Path) -> Iterator[Callable[[], RegistryFixture]]:
    """Factory of further registries (translation tests); each stopped at teardown."""
    started: list[RegistryFixture] = []

    def make() -> RegistryFixture:
        one = start_registry(tmp_path / f"registry-{len(started)}")
        started.append(one)
        return one

    yield make
    for one in started:
        one.stop()
