"""The Spark jobs' Kafka security options come from the bridge's config file and env, as the
Helm chart provides them from Secrets, and never need a secret on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs import stream
from spark_jobs.errors import JobConfigError
from spark_jobs.security import security_options

CHART_CONFIG = """\
consumer: {}
kafka:
  security.protocol: SASL_SSL
  sasl.mechanisms: SCRAM-SHA-512
  ssl.ca.location: /etc/eos-bridge/tls/ca.crt
  ssl.endpoint.identification.algorithm: https
  client.rack: zone-a
producer: {}
"""


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_sasl_ssl_as_the_chart_renders_it(tmp_path: Path) -> None:
    env = {
        "BRIDGE_CONFIG_FILE": write(tmp_path / "config.yaml", CHART_CONFIG),
        "BRIDGE_SASL_USERNAME": "bridge",
        "BRIDGE_SASL_PASSWORD": 'p"w\\d',
    }
    assert security_options(env) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="bridge" password="p\\"w\\\\d";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/eos-bridge/tls/ca.crt",
        "kafka.ssl.endpoint.identification.algorithm": "https",
    }


def test_mutual_tls_with_an_encrypted_key(tmp_path: Path) -> None:
    cert = write(tmp_path / "client.crt", "-----BEGIN CERTIFICATE-----\nc\n")
    key = write(tmp_path / "client.key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nk\n")
    config = (
        f"kafka:\n  security.protocol: ssl\n  ssl.certificate.location: {cert}\n"
        f"  ssl.key.location: {key}\n  ssl.endpoint.identification.algorithm: none\n"
    )
    env = {
        "BRIDGE_CONFIG_FILE": write(tmp_path / "config.yaml", config),
        "BRIDGE_KAFKA__ssl.key.password": "key-secret",
    }
    assert security_options(env) == {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\nc\n",
        "kafka.ssl.keystore.key": "-----BEGIN ENCRYPTED PRIVATE KEY-----\nk\n",
        "kafka.ssl.key.password": "key-secret",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }


def test_nothing_configured_means_no_options() -> None:
    assert security_options({}) == {}


@pytest.mark.parametrize(
    ("config", "env", "message"),
    [
        ("kafka: {sasl.mechanisms: GSSAPI}", {}, "sasl.mechanisms GSSAPI"),
        ("kafka: {}", {"BRIDGE_SASL_USERNAME": "u"}, "names no sasl.mechanisms"),
        (
            "kafka: {ssl.certificate.location: /nope.crt, ssl.key.location: /nope.key}",
            {},
            "ssl.certificate.location /nope.crt: cannot read it",
        ),
    ],
)
def test_bad_settings_name_the_setting(
    tmp_path: Path, config: str, env: dict[str, str], message: str
) -> None:
    env = {**env, "BRIDGE_CONFIG_FILE": write(tmp_path / "c.yaml", config)}
    with pytest.raises(JobConfigError, match=message):
        security_options(env)


def test_the_job_uses_them_and_kafka_option_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRIDGE_CONFIG_FILE", write(tmp_path / "config.yaml", CHART_CONFIG))
    monkeypatch.setenv("BRIDGE_SASL_USERNAME", "bridge")
    monkeypatch.setenv("BRIDGE_SASL_PASSWORD", "from-secret")
    args = stream.parse_args(
        ["--bootstrap", "k:9093", "--topic", "t", "--table", "/t", "--checkpoint", "/c",
         "--kafka-option", "kafka.ssl.endpoint.identification.algorithm="]
    )  # fmt: skip
    options = dict(stream.config_from(args).source.options)
    assert "from-secret" in options["kafka.sasl.jaas.config"]
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert options["kafka.security.protocol"] == "SASL_SSL"
