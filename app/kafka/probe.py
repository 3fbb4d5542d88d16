"""Whether librdkafka takes the user's client settings, asked before anything connects.

librdkafka checks a configuration when a client is created, and names the property in its
own words (``linger.ms`` is ``queue.buffering.max.ms`` to it). So the settings are tried on a
client without ``bootstrap.servers`` (it never connects), and on a refusal each key the user
wrote is left out in turn until the client is accepted: that key is the one to name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

Role = Literal["consumer", "producer"]
_QUIET = {"log_level": 0}


def refused_setting(
    role: Role, common: Mapping[str, Any], own: Mapping[str, Any]
) -> tuple[str, str] | None:
    """``(key, librdkafka's reason)`` for the first key of ``own`` (the ``consumer`` or
    ``producer`` section) that librdkafka refuses along with ``common`` (the cluster's shared
    settings), or None. What ``common`` alone gets refused for is left to client creation.
    """
    if not own or _refusal(role, {**common, **own}) is None:
        return None
    if _refusal(role, dict(common)) is not None:
        return None
    for key in reversed(list(own)):  # the last one written first
        alone = _refusal(role, {**common, key: own[key]})
        if alone is not None:
            return key, alone
    for key in own:  # refused only together with another: name the one that clears it
        reason = _refusal(role, {**common, **{k: v for k, v in own.items() if k != key}})
        if reason is None:
            return key, str(_refusal(role, {**common, **own}))
    key = next(iter(own))
    return key, str(_refusal(role, {**common, **own}))


def _refusal(role: Role, conf: dict[str, Any]) -> str | None:
    """librdkafka's reason for refusing ``conf``, or None when it takes it."""
    try:
        if role == "consumer":
            Consumer({**_QUIET, **conf, "group.id": "eos-bridge-probe"}).close()
        else:
            Producer({**_QUIET, **conf})
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        return str(err.str()) if isinstance(err, KafkaError) else str(exc)
    except (TypeError, ValueError) as exc:  # e.g. a value of a type librdkafka cannot take
        return str(exc)
    return None
