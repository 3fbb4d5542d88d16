"""Every librdkafka setting the bridge forces, in one place.

User settings (``kafka``, ``consumer``, ``producer`` maps of the config) are merged under these;
a user value for a forced key is refused by config validation rather than silently overridden.
"""

from __future__ import annotations

from typing import Any

# Keys the user may not set: they are what makes the bridge exactly-once.
FORCED_CONSUMER_KEYS = frozenset(
    {
        "group.id",
        "group.instance.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "isolation.level",
        "group.protocol",  # the group_protocol setting
    }
)
# Under group.protocol=consumer (KIP-848) the broker owns these; librdkafka refuses them.
CLASSIC_ONLY_CONSUMER_KEYS = {
    "session.timeout.ms": "group.consumer.session.timeout.ms",
    "heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "partition.assignment.strategy": "group.consumer.assignors",
    "group.protocol.type": "group.consumer.assignors",
}
FORCED_PRODUCER_KEYS = frozenset(
    {"transactional.id", "enable.idempotence", "acks", "transaction.timeout.ms"}
)

# Why each forced key is forced: what it is set to, or the setting it comes from (the error of a
# user value names it; the chart's refusal in deploy/helm says the same with its value names).
FORCED_REASONS = {
    "group.id": "from group_id",
    "group.instance.id": "from instance_id, with static_membership",
    "group.protocol": "from group_protocol",
    "enable.auto.commit": "false: positions are committed inside each transaction",
    "enable.auto.offset.store": "false: positions are committed inside each transaction",
    "isolation.level": "read_committed: records of aborted transactions are never read",
    "transactional.id": "from transactional_id_prefix and instance_id",
    "transaction.timeout.ms": "from transaction_timeout_ms",
    "enable.idempotence": "true: transactions need the idempotent producer",
    "acks": "all: transactions need the acknowledgement of every in-sync replica",
}

CONSUMER_DEFAULTS: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    # Fetch in large chunks: consume(num_messages=N) then returns full batches.
    "fetch.wait.max.ms": 100,
    "queued.min.messages": 20000,
    # Once the prefetch queue is full, look again after 10 ms, not librdkafka's 1000 ms: with
    # the default a consume-transform-produce loop stalls a second at a time.
    "fetch.queue.backoff.ms": 10,
}

PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "batch.num.messages": 10000,
    "compression.type": "none",
    # message.max.bytes stays at librdkafka's 1000000, below the broker's default 1048588:
    # a larger client limit lets a batch through that the broker then rejects inside the
    # transaction (MSG_SIZE_TOO_LARGE), and librdkafka 2.12 does not recover from that.
}


def consumer_config(
    bootstrap: str,
    group_id: str,
    static_member_id: str | None,
    common: dict[str, Any],
    extra: dict[str, Any],
    group_protocol: str = "consumer",
) -> dict[str, Any]:
    """The consumer's librdkafka configuration.

    ``static_member_id`` becomes ``group.instance.id`` (KIP-345): a restarted pod rejoins with
    its old assignment at once instead of waiting out the session timeout.
    """
    static = {"group.instance.id": static_member_id} if static_member_id else {}
    # KIP-848: the broker's range assignor, as librdkafka's classic default (range) assigns:
    # each member a share of every topic, the same partition numbers of co-partitioned topics
    # (the broker's default, uniform, may give one member all of one topic: a regrouped
    # pipeline's repartition partitions, which hold its state, all on one instance).
    assignor = {"group.remote.assignor": "range"} if group_protocol == "consumer" else {}
    return {
        **static,
        **assignor,
        **CONSUMER_DEFAULTS,
        **common,
        **extra,
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "group.protocol": group_protocol,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # read_committed also at-least-once: never forward another producer's aborted data.
        "isolation.level": "read_committed",
    }


def producer_config(
    bootstrap: str,
    transactional_id: str | None,
    transaction_timeout_ms: int,
    errors_only_reports: bool,
    common: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The producer's librdkafka configuration (transactional when ``transactional_id``)."""
    conf: dict[str, Any] = {
        **PRODUCER_DEFAULTS,
        **common,
        **extra,
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        # Without state, success reports carry nothing we need: skip them (hot-path cost).
        "delivery.report.only.error": errors_only_reports,
    }
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = transaction_timeout_ms
    return conf


# librdkafka's own defaults of the timeouts a coordinator failover is bounded by.
_LIBRDKAFKA_REQUEST_TIMEOUT_MS = 30_000
_LIBRDKAFKA_SESSION_TIMEOUT_MS = 45_000
STUCK_CALL_GRACE_S = 15.0  # the watchdog's margin over a call's own timeout (the cap)


def stuck_call_deadline(
    call_timeout: float,
    kafka: dict[str, Any],
    consumer: dict[str, Any],
    producer: dict[str, Any],
    group_session_ms: int | None = None,
) -> float:
    """Seconds after which the watchdog ends a blocking Kafka call (exit 3), by default.

    Two rounds of what a coordinator failover costs the clients: the larger of the producer's
    ``request.timeout.ms`` (a request to the dead coordinator times out) and the consumer's
    ``session.timeout.ms`` (the group notices a dead member), twice — once for the request
    that hit the dead broker, once for the retry on its successor. Never more than
    ``call_timeout`` + 15 s, the fixed deadline before: with librdkafka's defaults (30 s, 45 s)
    that cap is what applies; with tuned timeouts (5 s, 6 s) a stuck call ends after 12 s.
    Under ``group_protocol: consumer`` the broker holds the session timeout: the group's
    (``group_session_ms``, read at start-up), else the broker's documented default (45 s).
    """
    request_ms = producer.get("request.timeout.ms", kafka.get("request.timeout.ms"))
    session_ms = consumer.get("session.timeout.ms", kafka.get("session.timeout.ms"))
    session_ms = session_ms or group_session_ms
    request = float(request_ms or _LIBRDKAFKA_REQUEST_TIMEOUT_MS) / 1000
    session = float(session_ms or _LIBRDKAFKA_SESSION_TIMEOUT_MS) / 1000
    return min(2 * max(request, session), call_timeout + STUCK_CALL_GRACE_S)


_LIBRDKAFKA_SOCKET_TIMEOUT_MS = 60_000


def retried_after(producer: dict[str, Any]) -> float:
    """Seconds after which librdkafka times out a transactional request (``EndTxn``,
    ``AddOffsetsToTxn``, ``TxnOffsetCommit``) and sends it again by itself: its
    ``socket.timeout.ms`` (``request.timeout.ms`` bounds produce requests only). A transactional
    call that lasted this long may have left its first request in the network."""
    return float(producer.get("socket.timeout.ms") or _LIBRDKAFKA_SOCKET_TIMEOUT_MS) / 1000


# librdkafka keys whose values can carry a secret: passwords, PEM private keys, JAAS configs
# and the OAUTHBEARER config, whose "k=v" pairs may hold a client secret.
_SECRET_WORDS = ("password", "secret", "token", "key.pem", "jaas", "oauthbearer.config")


def masked(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the value of every key that can carry a secret masked (for logs)."""
    return {
        k: ("**********" if any(w in k for w in _SECRET_WORDS) else v) for k, v in values.items()
    }


def refuse_forced(value: dict[str, Any], forced: frozenset[str], section: str) -> None:
    """Refuse a user value for a key the bridge forces (``section`` names the setting)."""
    clash = sorted(set(value) & forced)
    if clash:
        key = clash[0]
        raise ValueError(
            f"{section}.{key} is set by the bridge itself ({FORCED_REASONS[key]}): remove it "
            f"(forced keys: {', '.join(sorted(forced))})"
        )
