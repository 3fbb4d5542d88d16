"""Start-up access checks: files, TLS, credentials and ACLs, each failing with one clear line.

librdkafka knows within a fraction of a second that a SASL password is wrong or a TLS handshake
failed, but reports it only through the client's error callback while a metadata request keeps
retrying. These checks listen to that callback and stop at the first such error instead of
waiting out ``startup_timeout``; then they ask the broker which operations the bridge's
principal may perform on its topics and group (``include_authorized_operations``), so a
missing ACL is named before the first record is read.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from app.errors import ConfigError
from app.kafka.errors import has_code, kafka_error

log = logging.getLogger(__name__)

# librdkafka settings that name a file the client must read at start.
_FILE_KEYS = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.crl.location",
)
_AUTH_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
_TLS_CODES = {KafkaError._SSL}


def check_files(conf: Mapping[str, Any]) -> None:
    """Every file a TLS setting names exists and is readable (else one line, exit 2)."""
    for key in _FILE_KEYS:
        path = conf.get(key)
        if path in (None, "", "probe"):  # "probe": librdkafka finds the system CA store
            continue
        if not os.path.isfile(str(path)) or not os.access(str(path), os.R_OK):
            raise ConfigError(
                f"{key}={path!r} (BRIDGE_KAFKA): no readable file there; mount the secret "
                f"or fix the path"
            )


def principal(conf: Mapping[str, Any]) -> str:
    """Who the broker will see, in words for error messages."""
    if conf.get("sasl.username"):
        return f"User:{conf['sasl.username']} ({conf.get('sasl.mechanism', 'GSSAPI')})"
    if conf.get("ssl.certificate.location"):
        return f"the client certificate {conf['ssl.certificate.location']}"
    return "the anonymous principal"


class _FirstError:
    """An ``error_cb`` that keeps the first authentication or TLS error librdkafka reports."""

    def __init__(self) -> None:
        self.error: KafkaError | None = None

    def __call__(self, err: KafkaError) -> None:
        if err.code() in _AUTH_CODES | _TLS_CODES and self.error is None:
            self.error = err


def connect(conf: Mapping[str, Any], timeout: float) -> tuple[AdminClient, set[str]]:
    """An admin client that reached the cluster, and the topics it sees.

    Raises:
        ConfigError: a file is missing, the key cannot be decrypted, the TLS handshake or the
            authentication failed (as soon as librdkafka reports it), or nothing answered
            within ``timeout``.
    """
    check_files(conf)
    errors = _FirstError()
    try:
        client_conf: dict[str, Any] = {**conf, "error_cb": errors}
        admin = AdminClient(client_conf)
    except KafkaException as exc:  # e.g. a key that the configured password cannot decrypt
        hint = ""
        if "ssl.key" in _reason(exc):
            hint = " Check ssl.key.password (the key's passphrase) and ssl.key.location."
        raise ConfigError(f"cannot create a Kafka client: {_reason(exc)}.{hint}") from None
    deadline = time.monotonic() + timeout
    last: str = "no answer"
    while time.monotonic() < deadline:
        try:
            # short asks: a SIGTERM meanwhile is handled between them (app.runner)
            meta = admin.list_topics(timeout=min(0.5, max(0.1, deadline - time.monotonic())))
            return admin, set(meta.topics)
        except KafkaException as exc:
            last = _reason(exc)
        admin.poll(0)  # serves error_cb
        if errors.error is not None:
            raise _access_error(errors.error, conf) from None
    if errors.error is not None:
        raise _access_error(errors.error, conf) from None
    hint = ""
    if "SSL" in str(conf.get("security.protocol", "")).upper() and not conf.get(
        "ssl.certificate.location"
    ):
        hint = (
            " If the listener requires a client certificate (mTLS), set "
            "ssl.certificate.location and ssl.key.location."
        )
    raise ConfigError(
        f"cannot reach Kafka at bootstrap_servers={conf.get('bootstrap.servers')!r} "
        f"(BRIDGE_BOOTSTRAP_SERVERS) within startup_timeout={timeout:.0f}s: {last}. Check the "
        f"address and the network.{hint}"
    )


def _access_error(err: KafkaError, conf: Mapping[str, Any]) -> ConfigError:
    where = conf.get("bootstrap.servers")
    if err.code() in _TLS_CODES:
        return ConfigError(
            f"TLS handshake with {where} failed: {err.str()}. Check ssl.ca.location (the CA "
            f"that signed the broker's certificate), the broker's host name against its "
            f"certificate, and the client certificate/key if the listener asks for one."
        )
    return ConfigError(
        f"authentication of {principal(conf)} at {where} failed: {err.str()}. Check "
        f"BRIDGE_SASL_USERNAME / BRIDGE_SASL_PASSWORD and sasl.mechanism."
    )


def check_acls(
    admin: AdminClient,
    conf: Mapping[str, Any],
    *,
    read_topics: Iterable[tuple[str, str]],
    write_topics: Iterable[tuple[str, str]],
    group: str | None,
    timeout: float,
    existing: set[str],
) -> None:
    """The principal may READ its inputs, WRITE its outputs and READ its group (None: a
    cluster the bridge only writes to).

    ``read_topics`` / ``write_topics`` are (setting, topic) pairs, for the message; topics not
    in ``existing`` (the cluster's listing) are checked for being hidden by a missing ACL and
    otherwise left to the caller's "does not exist". A broker without an authorizer reports no
    authorized operations (None): nothing to check then.
    """
    needs: dict[str, tuple[str, AclOperation]] = {}
    for setting, topic in read_topics:
        needs.setdefault(topic, (setting, AclOperation.READ))
    for setting, topic in write_topics:
        needs[topic] = (setting, AclOperation.WRITE)
    for topic in [t for t in needs if t not in existing]:
        # Missing from the listing: absent, or hidden because the principal may not even
        # DESCRIBE it (Kafka does not tell which); asked by name, the broker says which.
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        error = meta.error if meta is not None else None
        if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            setting, op = needs[topic]
            raise _acl_error(conf, f"topic {topic!r} ({setting})", op, error.str())
        del needs[topic]  # really absent: the caller reports it
    if not needs:
        return
    futures = admin.describe_topics(
        TopicCollection(list(needs)), request_timeout=timeout, include_authorized_operations=True
    )
    for topic, future in futures.items():
        setting, op = needs[topic]
        try:
            allowed = future.result(timeout).authorized_operations
        except KafkaException as exc:
            if has_code(exc, KafkaError.TOPIC_AUTHORIZATION_FAILED):
                raise _acl_error(conf, f"topic {topic!r} ({setting})", op, _reason(exc)) from None
            # No verdict (a controller or coordinator moving, a local timeout): the client
            # that needs the ACL reports a refusal itself.
            log.warning(_UNCHECKED, f"topic {topic!r}", timeout, _reason(exc))
            continue
        except TimeoutError:  # a broker too busy to answer
            log.warning(_UNCHECKED, f"topic {topic!r}", timeout, _NO_ANSWER)
            continue
        if allowed is not None and op not in allowed:
            raise _acl_error(conf, f"topic {topic!r} ({setting})", op, "not granted")
    if group is None:  # a cluster the bridge only writes to
        return
    allowed = _group_operations(admin, group, timeout)
    if allowed is not None and AclOperation.READ not in allowed:
        raise _acl_error(conf, f"group {group!r} (group_id)", AclOperation.READ, "not granted")


def _group_operations(admin: AdminClient, group: str, timeout: float) -> list[Any] | None:
    """What the principal may do with ``group``; None when the broker cannot say yet (its
    group coordinator still loading, or no answer within ``timeout`` on a busy broker that is
    still creating ``__consumer_offsets``): the consumer will report a refusal itself."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        (future,) = admin.describe_consumer_groups(
            [group], request_timeout=left, include_authorized_operations=True
        ).values()
        try:
            ops: list[Any] | None = future.result(left).authorized_operations
            return ops
        except KafkaException as exc:
            if has_code(exc, KafkaError.GROUP_AUTHORIZATION_FAILED):
                return []
        except TimeoutError:
            pass
        if time.monotonic() > deadline:
            log.warning(_UNCHECKED, f"group {group!r}", timeout, _NO_ANSWER)
            return None
        time.sleep(0.2)


_UNCHECKED = (
    "could not learn what this principal may do with %s within startup_timeout=%.0fs (%s); "
    "starting anyway: a missing ACL is reported by the client that needs it"
)
_NO_ANSWER = "no answer from the broker"


def _acl_error(conf: Mapping[str, Any], resource: str, op: AclOperation, why: str) -> ConfigError:
    return ConfigError(
        f"{principal(conf)} may not {op.name} {resource}: {why}. Grant it, e.g. "
        f"kafka-acls --add --allow-principal <principal> --operation {op.name} on that resource "
        f"(docs/security.md lists every ACL the bridge needs)."
    )


def _reason(exc: BaseException) -> str:
    inner = exc.args[0] if exc.args else exc
    return inner.str() if isinstance(inner, KafkaError) else str(inner)


def transactional_access_error(
    exc: BaseException, conf: Mapping[str, Any], transactional_id: str
) -> ConfigError | None:
    """The one-line configuration error for an ``init_transactions`` the broker refused for
    lack of an ACL (None when ``exc`` was caused by something else)."""
    err = kafka_error(exc.__cause__ if exc.__cause__ is not None else exc)
    if err is None:
        return None
    if err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return ConfigError(
            f"{principal(conf)} may not use transactional.id {transactional_id!r}: not "
            f"granted. Grant WRITE and DESCRIBE on TransactionalId {transactional_id!r} (or a "
            f"prefix of it, e.g. BRIDGE_TRANSACTIONAL_ID_PREFIX); docs/security.md lists every "
            f"ACL the bridge needs."
        )
    if err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        return ConfigError(
            f"{principal(conf)} may not IDEMPOTENT_WRITE on the cluster: not granted. Grant it "
            f"(or WRITE on the transactional id, which implies it on Kafka 3+); "
            f"docs/security.md lists every ACL the bridge needs."
        )
    return None
