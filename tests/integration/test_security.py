"""The bridge against a broker really configured for security: SASL_SSL with SCRAM-SHA-512,
an mTLS listener with ``ssl.client.auth=required``, and ``StandardAuthorizer`` ACLs that grant
the bridge's principal only what it needs (devkit.kafka.security)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from app.serde.registry import RegistryConfigError, RegistrySettings
from devkit.kafka import LocalKafka
from devkit.kafka.cluster import free_port
from devkit.kafka.security import MTLS_CLIENT_CN, bridge_acls, create_acls
from tests.integration.conftest import MakeBridge
from tests.support.bridge import (
    REPO,
    BridgeProcess,
    base_settings,
    bridge_topics,
    http_get,
    json_records,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

READER_GROUP = "eos-bridge-reader"  # app.kafka.topics' read-to-end consumer (assign only)


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
    secure: LocalKafka, bridges: MakeBridge, listener: str, tmp_path: Path
) -> None:
    """Exactly once over the listener with only the ACLs the bridge needs, and the static
    member removed from its group at the stop; then ``verify`` and ``check-config`` with the
    same settings; no secret in any output (logs at DEBUG with
    librdkafka's security debugging, /metrics, verify, check-config)."""
    admin = KafkaFixture(secure.bootstrap)  # the super user's PLAINTEXT door
    src, out, dlq = bridge_topics(admin)
    values, keys = json_records(5000)
    admin.seed(src, values, keys)
    port = free_port()
    # leave_group_on_shutdown=always: the static member's removal (kafka-python, with the
    # librdkafka security settings mapped by app.kafka.leave) goes over the same listener.
    settings = base_settings(
        admin, src, out, dlq, log_level="DEBUG", http_port=port, leave_group_on_shutdown="always"
    )
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
    metrics = http_get(port, "/metrics")[1]
    assert "eos_bridge_input_records_total" in metrics
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    ids = Counter(orjson.loads(r.value)["id"] for r in admin.read_all(out))
    assert ids == Counter(orjson.loads(v)["id"] for v in values)
    assert admin.end_offsets(out, True) == admin.end_offsets(out, False)
    logs = bridge.logs()
    assert "SASL" in logs or "SSL" in logs, "librdkafka's security debug lines are missing"
    assert "removed static member 'i0'" in logs, logs[-3000:]

    # verify reads the output and DLQ too, with its reader's group id (only that one: the
    # secure broker is shared, and a wildcard would grant the negative tests' groups too).
    literal = ResourcePatternType.LITERAL
    create_acls(
        secure.bootstrap,
        [
            AclBinding(
                kind, name, literal, principal, "*", AclOperation.READ, AclPermissionType.ALLOW
            )
            for kind, name in (
                (ResourceType.TOPIC, out),
                (ResourceType.TOPIC, dlq),
                (ResourceType.GROUP, READER_GROUP),
            )
        ],
    )
    env = BridgeProcess(tmp_path, **{**settings, **client}).env()
    outputs = [logs, metrics]
    for command in (
        ["verify", "--input", src, "--output", out, "--dlq", dlq, "--id-field", "id"],
        ["check-config"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "app", *command], env=env, cwd=REPO,
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{command[0]}: {done.stdout}{done.stderr}"[-3000:]
        outputs.append(done.stdout + done.stderr)
    for secret in secrets:
        assert not any(secret in text for text in outputs), "a secret was printed"


def test_secure_listeners_refuse_a_client_without_credentials(secure: LocalKafka) -> None:
    """Negative control: the listeners really are secured (no ACL, no certificate, no way in)."""
    for bootstrap in (secure.sasl_bootstrap, secure.mtls_bootstrap):
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        with pytest.raises(Exception):  # noqa: B017 - any failure will do: it must not connect
            admin.list_topics(timeout=3)


def test_dev_kafka_secure_writes_working_bridge_settings(tmp_path: Path) -> None:
    """`python -m devkit.kafka start --secure`: the env files it writes get a client in."""
    home = tmp_path / "dk"
    cli = [sys.executable, "-m", "devkit.kafka"]
    started = subprocess.run(
        [*cli, "start", "--secure", "--dir", str(home), "--port", str(free_port())],
        capture_output=True, text=True, timeout=180, check=False, cwd=REPO,
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
        stop = [*cli, "stop", "--dir", str(home)]
        subprocess.run(stop, capture_output=True, timeout=60, cwd=REPO, check=False)


def _refused_start(
    secure: LocalKafka, listener: str, tmp_path: Path, change: dict[str, Any], drop: str | None
) -> tuple[int, str]:
    """Start a bridge over ``listener`` with ``change`` applied to its settings and every ACL
    it needs except those of ``drop`` ("topic:READ", "topic:WRITE", "group", "txn"); returns
    its exit code and output."""
    admin = KafkaFixture(secure.bootstrap)
    src, out, dlq = bridge_topics(admin)
    settings = base_settings(admin, src, out, dlq, startup_timeout=20)
    principal = "User:bridge" if listener == "sasl_ssl" else f"User:{MTLS_CLIENT_CN}"
    wanted = bridge_acls(
        principal, inputs=[src], outputs=[out, dlq], group=settings["group_id"],
        transactional_id_prefix=settings["group_id"],
    )  # fmt: skip
    dropped = {
        "topic:READ": lambda b: b.restype == ResourceType.TOPIC and b.name == src,
        "topic:WRITE": lambda b: b.restype == ResourceType.TOPIC and b.name == out,
        "group": lambda b: b.restype == ResourceType.GROUP,
        "txn": lambda b: b.restype == ResourceType.TRANSACTIONAL_ID,
    }
    keep = dropped[drop] if drop else (lambda b: False)
    create_acls(secure.bootstrap, [b for b in wanted if not keep(b)])
    client, _ = _client_settings(secure, listener)
    merged = {**settings, **client}
    merged["kafka"] = {**client["kafka"], **change.pop("kafka", {})}
    merged.update(change)
    merged["kafka"].pop("debug", None)
    env = BridgeProcess(tmp_path, **merged).env()
    proc = subprocess.run(
        [sys.executable, "-m", "app", "run"], env=env, cwd=REPO, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


NEGATIVE = {
    "wrong password": (
        "sasl_ssl", {"sasl_password": "not-the-password"}, None,
        "authentication of User:bridge (SCRAM-SHA-512) at",
    ),
    "CA file missing": (
        "sasl_ssl", {"kafka": {"ssl.ca.location": "/nonexistent/ca.pem"}}, None,
        "ssl.ca.location='/nonexistent/ca.pem' (BRIDGE_KAFKA): no readable file there",
    ),
    "wrong CA": ("sasl_ssl", {"kafka": {"ssl.ca.location": "CLIENT_CERT"}}, None, "TLS handshake"),
    "wrong key password": (
        "mtls", {"kafka": {"ssl.key.password": "wrong"}}, None, "Check ssl.key.password",
    ),
    "no READ on the input": ("sasl_ssl", {}, "topic:READ", "may not READ topic"),
    "no WRITE on the output": ("sasl_ssl", {}, "topic:WRITE", "may not WRITE topic"),
    "no READ on the group": ("mtls", {}, "group", "may not READ group"),
    "no WRITE on the transactional id": ("sasl_ssl", {}, "txn", "may not use transactional.id"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(NEGATIVE))
def test_access_problems_refuse_to_start_with_one_line(
    secure: LocalKafka, tmp_path: Path, case: str
) -> None:
    listener, change, drop, expected = NEGATIVE[case]
    assert secure.security is not None
    change = {**change}
    if change.get("kafka", {}).get("ssl.ca.location") == "CLIENT_CERT":
        change["kafka"] = {"ssl.ca.location": str(secure.security.client_cert)}
    code, output = _refused_start(secure, listener, tmp_path, change, drop)
    assert code == 2, output[-3000:]
    errors = [line for line in output.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and expected in errors[0], output[-3000:]
    assert "Traceback" not in output


def test_registry_tls_settings_load_the_client_key_with_its_password(secure: LocalKafka) -> None:
    """The schema registry client's mTLS settings, on the secure broker's certificates (the
    client key is encrypted with client_key_password); no registry is asked."""
    tls = secure.security
    assert tls is not None
    url = "http://127.0.0.1:1/apis/ccompat/v7"
    mtls = {"ca_location": tls.ca, "cert_location": tls.client_cert, "key_location": tls.client_key}
    RegistrySettings(url=url, key_password=tls.client_key_password, **mtls).client().close()  # type: ignore[arg-type]
    with pytest.raises(RegistryConfigError, match="key_password"):
        RegistrySettings(url=url, key_password="wrong", **mtls).client()  # type: ignore[arg-type]
