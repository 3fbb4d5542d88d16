"""Kafka security options of the jobs, from the bridge's own settings; never from the command line.

The jobs read what the bridge reads (and what the Helm chart mounts from Secrets):

- the ``kafka:`` map of the bridge's config file (``$BRIDGE_CONFIG_FILE``), librdkafka names:
  ``security.protocol``, ``sasl.mechanisms``, ``ssl.ca.location``, ``ssl.certificate.location``,
  ``ssl.key.location``, ``ssl.endpoint.identification.algorithm``;
- ``BRIDGE_KAFKA`` (a JSON object, as ``python -m devkit.kafka start --secure`` writes it) and
  ``BRIDGE_KAFKA__<key>`` variables, which win over the file (the chart passes the client key's
  password as ``BRIDGE_KAFKA__ssl.key.password``);
- ``BRIDGE_SASL_USERNAME`` / ``BRIDGE_SASL_PASSWORD``.

They become the Java client's ``kafka.*`` options: a JAAS line for SASL, PEM trust and key
stores for TLS. ``--kafka-option`` still wins for anything set here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from spark_jobs.errors import JobConfigError

CONFIG_FILE_ENV = "BRIDGE_CONFIG_FILE"
_NESTED_PREFIX = "BRIDGE_KAFKA__"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Option keys whose values are secrets: Spark redacts them in plans and the UI (see session.py).
SECRET_OPTIONS_REGEX = r"(?i)url|jaas|keystore\.key|key\.password"


def bridge_config_section(env: Mapping[str, str], section: str) -> dict[str, str]:
    """One map of the bridge's config file (``$BRIDGE_CONFIG_FILE``), values as text; empty
    without the file or the section."""
    path = env.get(CONFIG_FILE_ENV)
    if not path:
        return {}
    try:
        doc: Any = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise JobConfigError(f"{CONFIG_FILE_ENV}={path}: cannot read it ({exc})") from None
    return {str(k): str(v) for k, v in (doc.get(section) or {}).items()}


def bridge_kafka_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The bridge's librdkafka ``kafka:`` map: config file, then ``BRIDGE_KAFKA__*``."""
    settings = bridge_config_section(env, "kafka")
    whole = env.get("BRIDGE_KAFKA")  # the bridge's JSON form (the dev broker writes it)
    if whole:
        try:
            doc = json.loads(whole)
        except ValueError as exc:
            raise JobConfigError(f"BRIDGE_KAFKA is not a JSON object ({exc})") from None
        if not isinstance(doc, dict):
            raise JobConfigError("BRIDGE_KAFKA is not a JSON object")
        settings.update({str(k): str(v) for k, v in doc.items()})
    for name, value in env.items():
        if name.upper().startswith(_NESTED_PREFIX):
            settings[name[len(_NESTED_PREFIX) :].lower()] = value
    return settings


def security_options(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``kafka.*`` reader options for the protocol, SASL and TLS the bridge is configured with.

    Raises:
        JobConfigError: an unsupported SASL mechanism, credentials without a mechanism, or a
            TLS file that cannot be read; the message names the setting.
    """
    env = os.environ if env is None else env
    kafka = bridge_kafka_settings(env)
    options: dict[str, str] = {}
    if "security.protocol" in kafka:
        options["kafka.security.protocol"] = kafka["security.protocol"].upper()
    options.update(_sasl(kafka, env))
    options.update(_tls(kafka))
    return options


def _sasl(kafka: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    mechanism = kafka.get("sasl.mechanisms") or kafka.get("sasl.mechanism")
    username, password = env.get("BRIDGE_SASL_USERNAME"), env.get("BRIDGE_SASL_PASSWORD")
    if mechanism is None:
        if username is not None or password is not None:
            raise JobConfigError(
                "BRIDGE_SASL_USERNAME/BRIDGE_SASL_PASSWORD are set but the bridge config names no "
                "sasl.mechanisms (kafka: map of BRIDGE_CONFIG_FILE)"
            )
        return {}
    module = _LOGIN_MODULES.get(mechanism.upper())
    if module is None:
        raise JobConfigError(
            f"sasl.mechanisms {mechanism}: the Spark jobs support {', '.join(_LOGIN_MODULES)}"
        )
    options = {"kafka.sasl.mechanism": mechanism.upper()}
    if username is not None and password is not None:
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{_jaas_quote(username)}" '
            f'password="{_jaas_quote(password)}";'
        )
    return options


def _tls(kafka: Mapping[str, str]) -> dict[str, str]:
    options: dict[str, str] = {}
    if "ssl.ca.location" in kafka:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = kafka["ssl.ca.location"]
    cert, key = kafka.get("ssl.certificate.location"), kafka.get("ssl.key.location")
    if cert and key:
        # The Java client's PEM key store takes the chain and the (PKCS#8) key as values, so a
        # certificate and key in two files, as librdkafka wants them, need no conversion.
        options["kafka.ssl.keystore.type"] = "PEM"
        options["kafka.ssl.keystore.certificate.chain"] = _read(cert, "ssl.certificate.location")
        options["kafka.ssl.keystore.key"] = _read(key, "ssl.key.location")
        if "ssl.key.password" in kafka:
            options["kafka.ssl.key.password"] = kafka["ssl.key.password"]
    algorithm = kafka.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        options["kafka.ssl.endpoint.identification.algorithm"] = (
            "" if algorithm.lower() == "none" else algorithm
        )
    return options


def _read(path: str, setting: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise JobConfigError(f"{setting} {path}: cannot read it ({exc.strerror})") from None


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
