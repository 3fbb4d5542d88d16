"""The static member's removal (app.kafka.leave): librdkafka's security settings mapped to
kafka-python's, a setting with no equivalent refused by name, a failure as one line, and
kafka-python imported only when a member is removed."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.kafka import leave
from app.kafka.leave import LeaveFailed, kafka_python_config, remove_static_member

ROOT = Path(__file__).resolve().parents[3]
# kafka-python 3.0 reads its protocol schemas with importlib.resources' legacy calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_plaintext_by_default_with_bounded_timeouts() -> None:
    conf = kafka_python_config("a:9092,b:9092", {}, 5.0)
    assert conf["bootstrap_servers"] == ["a:9092", "b:9092"]
    assert conf["security_protocol"] == "PLAINTEXT"
    assert conf["request_timeout_ms"] == conf["bootstrap_timeout_ms"] == 5000


def test_sasl_ssl_with_scram_and_a_ca_file() -> None:
    common = {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bridge", "sasl.password": "s3cret",
        "ssl.ca.location": "/etc/kafka/ca.pem", "ssl.endpoint.identification.algorithm": "none",
    }  # fmt: skip
    conf = kafka_python_config("b:9093", common, 5.0)
    assert conf["security_protocol"] == "SASL_SSL"
    assert conf["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl_plain_username"], conf["sasl_plain_password"]) == ("bridge", "s3cret")
    assert conf["ssl_cafile"] == "/etc/kafka/ca.pem"
    assert conf["ssl_check_hostname"] is False


def test_mutual_tls_and_the_plural_mechanisms_key() -> None:
    common = {
        "security.protocol": "SSL", "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/k.pem", "ssl.key.password": "pw",
    }  # fmt: skip
    conf = kafka_python_config("b:9093", common, 5.0)
    assert (conf["ssl_certfile"], conf["ssl_keyfile"], conf["ssl_password"]) == (
        "/c.pem", "/k.pem", "pw",
    )  # fmt: skip
    assert conf["ssl_check_hostname"] is True
    plural = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"}
    assert kafka_python_config("b:1", plural, 5.0)["sasl_mechanism"] == "PLAIN"


def test_verification_off_is_an_unverifying_tls_context() -> None:
    common = {"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"}
    context = kafka_python_config("b:9093", common, 5.0)["ssl_context"]
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


@pytest.mark.parametrize(
    ("common", "named"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER"),
        ({"security.protocol": "SSL", "ssl.ca.pem": "-----BEGIN"}, "ssl.ca.pem"),
        ({"sasl.oauthbearer.method": "oidc"}, "sasl.oauthbearer.method"),
        ({"security.protocol": "kerberos"}, "security.protocol"),
    ],
)
def test_a_security_setting_without_an_equivalent_is_refused_by_name(
    common: dict[str, str], named: str
) -> None:
    with pytest.raises(LeaveFailed, match=named):
        kafka_python_config("b:9093", common, 5.0)


def test_tuning_settings_are_not_security_and_are_ignored() -> None:
    conf = kafka_python_config("b:1", {"socket.keepalive.enable": True, "log_level": 2}, 5.0)
    assert "socket.keepalive.enable" not in conf and "log_level" not in conf


def test_an_unreachable_cluster_is_one_line_within_the_timeout() -> None:
    with pytest.raises(LeaveFailed) as failed:
        remove_static_member("127.0.0.1:1", {}, "g", "i1", "test", timeout_s=1.0)
    assert "\n" not in str(failed.value) and str(failed.value)


def test_a_request_that_never_ends_is_given_up_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No stage of kafka-python can hold the shutdown: the leave thread is abandoned."""
    never = threading.Event()  # set only after the call returned: the request never ends
    monkeypatch.setattr(leave, "_remove", lambda *_args: never.wait())
    try:
        with pytest.raises(LeaveFailed, match=r"no answer from the group coordinator within 0\.5s"):
            remove_static_member("127.0.0.1:1", {}, "g", "i1", "test", timeout_s=0.5)
    finally:
        never.set()


def test_the_coordinators_per_member_error_is_the_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoError: ...

    class UnknownMemberIdError: ...

    class GroupAuthorizationFailedError: ...

    def answer(error: type) -> None:
        monkeypatch.setattr(leave, "_remove", lambda *args: args[-1].append({"m": error}))

    answer(NoError)
    assert remove_static_member("b:1", {}, "g", "i1", "t", 1.0) is True
    answer(UnknownMemberIdError)  # already gone (expired, or removed before): nothing to do
    assert remove_static_member("b:1", {}, "g", "i1", "t", 1.0) is False
    answer(GroupAuthorizationFailedError)
    with pytest.raises(LeaveFailed, match="refused: GroupAuthorizationFailedError"):
        remove_static_member("b:1", {}, "g", "i1", "t", 1.0)


def test_importing_the_cli_and_the_runner_loads_no_kafka_python() -> None:
    probe = (
        "import app.commands.cli, app.runner, app.kafka.leave, json, sys\n"
        "print(json.dumps([m for m in sys.modules if m == 'kafka' or m.startswith('kafka.')]))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
