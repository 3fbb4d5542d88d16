"""Remove this instance's static member from its consumer group (KIP-345), after it stopped.

Why: a static member (``group.instance.id``) that stops does not leave its group. librdkafka
sends no LeaveGroup for it under the classic protocol, and under KIP-848 it leaves with member
epoch -2, a *temporary* leave: in both cases the coordinator keeps its partitions until the
session timeout (45 s by default), so a restart within it moves nothing. That is right for a
restart and wrong for an instance that is gone for good (a StatefulSet scale-down): its
partitions then stand still for the whole timeout. Kafka Streams solves this with
``KafkaStreams.close(CloseOptions.leaveGroup(true))``, which calls the admin API
``removeMembersFromConsumerGroup`` for its own ``group.instance.id``. librdkafka (and so
confluent-kafka) has no such admin call; kafka-python's ``remove_group_members`` sends the same
request (LeaveGroup v3+ naming the ``group.instance.id``), which the coordinator accepts for
classic and consumer-protocol (KIP-848) groups alike.

kafka-python is imported only here, inside :func:`remove_static_member`: nothing else of the
bridge loads it (``import app.commands.cli`` does not).

The client settings are the bridge's librdkafka ones, mapped to kafka-python's arguments by
:func:`kafka_python_config`; a security setting with no equivalent there is refused by name
(:class:`LeaveFailed`) rather than ignored, so no request goes out with weaker security than
the consumer's.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Mapping
from typing import Any

KafkaValue = str | int | float | bool

log = logging.getLogger(__name__)

# librdkafka -> kafka-python, values passed as they are.
_SAME = {
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "client.id": "client_id",
}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")
# Security settings kafka-python has no place for: refused (not silently dropped).
_SECURITY_PREFIXES = ("ssl.", "sasl.", "ssl_", "enable.ssl.")
# Settings of no consequence for one admin request (librdkafka tuning, logging, ...).
_IGNORED_SECURITY = {"ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification"}


class LeaveFailed(Exception):
    """The member could not be removed; the message is one line saying why."""


def kafka_python_config(
    bootstrap_servers: str, common: Mapping[str, KafkaValue], timeout_s: float
) -> dict[str, Any]:
    """kafka-python ``KafkaAdminClient`` arguments equivalent to the librdkafka settings
    ``common`` (a cluster's shared settings, credentials included).

    Raises:
        LeaveFailed: a security setting that has no kafka-python equivalent (named).
    """
    timeout_ms = max(1000, int(timeout_s * 1000))
    conf: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers.split(","),
        "client_id": "eos-bridge-leave",
        "request_timeout_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,
        "reconnect_backoff_max_ms": 1000,
    }
    protocol = str(common.get("security.protocol", "plaintext")).upper()
    if protocol not in _PROTOCOLS:
        raise LeaveFailed(f"security.protocol={protocol.lower()!r} has no kafka-python equivalent")
    conf["security_protocol"] = protocol
    mechanism = common.get("sasl.mechanism", common.get("sasl.mechanisms"))
    if protocol.startswith("SASL"):
        name = str(mechanism or "GSSAPI").upper()
        if name not in _MECHANISMS:
            raise LeaveFailed(f"sasl.mechanism={name!r} is not supported for the group leave")
        conf["sasl_mechanism"] = name
    for key, value in common.items():
        if key in _SAME:
            conf[_SAME[key]] = str(value)
        elif key in ("security.protocol", "sasl.mechanism", "sasl.mechanisms"):
            continue
        elif key in _IGNORED_SECURITY:
            continue  # below, in the TLS context
        elif key.startswith(_SECURITY_PREFIXES):
            raise LeaveFailed(f"{key} has no kafka-python equivalent")
    if protocol.endswith("SSL"):
        verify = _flag(common.get("enable.ssl.certificate.verification", True))
        hostname = str(common.get("ssl.endpoint.identification.algorithm", "https")).lower()
        conf["ssl_check_hostname"] = verify and hostname == "https"
        if not verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            if "ssl_certfile" in conf:
                context.load_cert_chain(
                    conf["ssl_certfile"], conf.get("ssl_keyfile"), conf.get("ssl_password")
                )
            conf["ssl_context"] = context
    return conf


def _flag(value: KafkaValue) -> bool:
    return str(value).strip().lower() not in ("false", "0", "no", "off")


def remove_static_member(
    bootstrap_servers: str,
    common: Mapping[str, KafkaValue],
    group_id: str,
    instance_id: str,
    reason: str,
    timeout_s: float,
) -> bool:
    """Remove the static member ``instance_id`` from ``group_id``: its partitions are assigned
    to the other members now, not after the session timeout. Returns False when the group had
    no such member (it already left or expired: nothing to do).

    Raises:
        LeaveFailed: the request could not be made or the coordinator refused it.
    """
    conf = kafka_python_config(bootstrap_servers, common, timeout_s)
    quiet = logging.getLogger("kafka")  # kafka-python's own lines: the caller says one
    level = quiet.level
    quiet.setLevel(logging.CRITICAL + 1)
    outcome: list[dict[Any, Any] | BaseException] = []
    # On a thread of its own, so that no stage of kafka-python (bootstrap, coordinator lookup,
    # the request, their retries) can hold the shutdown past ``timeout_s`` (and the watchdog's
    # shutdown_timeout, whose expiry would be exit 3): it is given up with the process.
    worker = threading.Thread(
        target=_remove,
        args=(conf, group_id, instance_id, reason, outcome),
        name="eos-bridge-leave",
        daemon=True,
    )
    worker.start()
    worker.join(timeout_s + 1)
    if worker.is_alive():  # kafka-python stays quiet: the process ends right after this
        raise LeaveFailed(f"no answer from the group coordinator within {timeout_s:g}s")
    quiet.setLevel(level)
    if not outcome:
        raise LeaveFailed("the request ended without an outcome")
    result = outcome[0]
    if isinstance(result, LeaveFailed):
        raise result
    if isinstance(result, BaseException):
        raise LeaveFailed(_one_line(result))
    for error in result.values():
        name = getattr(error, "__name__", str(error))
        if name == "NoError":
            continue
        if name == "UnknownMemberIdError":
            return False
        raise LeaveFailed(f"the coordinator refused: {name}")
    return True


def _remove(
    conf: dict[str, Any],
    group_id: str,
    instance_id: str,
    reason: str,
    outcome: list[dict[Any, Any] | BaseException],
) -> None:
    """The request itself (on the leave thread): its result or exception into ``outcome``."""
    try:
        from kafka.admin import KafkaAdminClient, MemberToRemove

        admin = KafkaAdminClient(**conf)
        try:
            member = MemberToRemove(group_instance_id=instance_id, reason=reason)
            outcome.append(dict(admin.remove_group_members(group_id, [member])))
        finally:
            admin.close()
    except Exception as exc:  # any failure is one line; the session timeout then applies
        outcome.append(exc)


def _one_line(exc: BaseException) -> str:
    name, text = type(exc).__name__, " ".join(str(exc).split())
    return (text if text.startswith(name) else f"{name}: {text}".rstrip(": "))[:300]
