"""The bridge against a broker really configured for security: SASL_SSL with SCRAM-SHA-512,
an mTLS listener with ``ssl.client.auth=required``, and ``StandardAuthorizer`` ACLs that grant
the bridge's principal only what it needs (app.devkafka.security)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from app.devkafka import LocalKafka
from app.devkafka.cluster import free_port
from app.devkafka.security import MTLS_CLIENT_CN, bridge_acls, create_acls
from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, bridge_topics, json_records, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    cluster = LocalKafka(tmp_path_factory.mktemp("secure-kafka"), secure=True, heap="512m")
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


def _client_settings(cluster: LocalKafka, listener: str) -> tuple[dict[str, Any], list[str]]:
    """BRIDGE_* settings for ``listener`` and the secrets that must never be printed."""
    security = cluster.security
    assert security is not None
    debug = {"debug": "security,broker"}  # librdkafka's most talkative security logging
    if listener == "sasl_ssl":
        client = security.sasl_ssl_client()
        password = client.pop("sasl.password")
        username = client.pop("sasl.username")
        return {
            "bootstrap_servers": cluster.sasl_bootstrap,
            "sasl_username": username,
            "sasl_password": password,
            "kafka": {**client, **debug},
        }, [password]
    client = security.mtls_client()
    return {
        "bootstrap_servers": cluster.mtls_bootstrap,
        "kafka": {**client, **debug},
    }, [client["ssl.key.password"]]


@pytest.mark.parametrize("listener", ["sasl_ssl", "mtls"])
def test_bridge_moves_records_exactly_once_over_a_secure_listener(
    secure: LocalKafka, bridges: MakeBridge, listener: str
) -> None:
    admin = KafkaFixture(secure.bootstrap)  # the super user's PLAINTEXT door
    src, out, dlq = bridge_topics(admin)
    values, keys = json_records(5000)
    admin.seed(src, values, keys)
    settings = base_settings(admin, src, out, dlq, log_level="DEBUG")
    principal = "User:bridge" if listener == "sasl_ssl" else f"User:{MTLS_CLIENT_CN}"
    create_acls(
        secure.bootstrap,
        bridge_acls(
            principal,
            inputs=[src],
            outputs=[out, dlq],
            group=settings["group_id"],
            transactional_id_prefix=settings["group_id"],
        ),
    )
    client, secrets = _client_settings(secure, listener)
    bridge = bridges(**{**settings, **client}).start()
    wait_caught_up(admin, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    ids = Counter(orjson.loads(r.value)["id"] for r in admin.read_all(out))
    assert ids == Counter(orjson.loads(v)["id"] for v in values)
    assert admin.end_offsets(out, True) == admin.end_offsets(out, False)
    logs = bridge.logs()
    assert "SASL" in logs or "SSL" in logs, "librdkafka's security debug lines are missing"
    for secret in secrets:
        assert secret not in logs, "a secret was printed"


def test_secure_listeners_refuse_a_client_without_credentials(secure: LocalKafka) -> None:
    """Negative control: the listeners really are secured (no ACL, no certificate, no way in)."""
    for bootstrap in (secure.sasl_bootstrap, secure.mtls_bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        with pytest.raises(Exception):  # noqa: B017 - any failure will do: it must not connect
            admin.list_topics(timeout=3)


def test_dev_kafka_secure_writes_working_bridge_settings(tmp_path: Path) -> None:
    """`eos-bridge dev-kafka start --secure`: the env files it writes get a client in."""
    home = tmp_path / "dk"
    cli = [sys.executable, "-m", "app.cli", "dev-kafka"]
    started = subprocess.run(
        [*cli, "start", "--secure", "--dir", str(home), "--port", str(free_port())],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        admin_bootstrap = started.stdout.split("bootstrap ")[1].split()[0]
        topic = KafkaFixture(admin_bootstrap).create_topic()
        for name in ("sasl.env", "mtls.env"):
            env_file = home / "security" / name
            assert env_file.stat().st_mode & 0o077 == 0, f"{name} is readable by others"
            env = dict(
                line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line
            )
            env = {k: v.strip("'") for k, v in env.items()}
            conf = {"bootstrap.servers": env["BRIDGE_BOOTSTRAP_SERVERS"]}
            conf |= orjson.loads(env["BRIDGE_KAFKA"])
            if "BRIDGE_SASL_USERNAME" in env:
                conf |= {
                    "sasl.username": env["BRIDGE_SASL_USERNAME"],
                    "sasl.password": env["BRIDGE_SASL_PASSWORD"],
                }
            reports: list[object] = []
            producer = Producer(conf)
            producer.produce(topic, b"hello", on_delivery=lambda e, _m, r=reports: r.append(e))
            assert producer.flush(60) == 0
            assert reports == [None], f"{name}: {reports}"
    finally:
        subprocess.run([*cli, "stop", "--dir", str(home)], capture_output=True, timeout=60)
