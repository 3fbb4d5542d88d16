"""Checks of the settings as a whole, each raising ``ValueError`` with one line naming the
setting the user wrote (:func:`app.config.format_validation_error` adds the rest).

Kept out of :mod:`app.config`, which declares the fields: these are the rules between them,
and the questions asked of the machine (a usable ``state_dir``) and of librdkafka (does it
take the ``consumer``/``producer``/``kafka`` values?) before anything connects.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel

from app.kafka.defaults import (
    CLASSIC_ONLY_CONSUMER_KEYS,
    consumer_config,
    masked,
    producer_config,
)
from app.kafka.probe import Role, refused_setting

ECHO_CHARS = 200  # longest user value a message quotes


# The checks read a BridgeSettings (app.config imports this module, so not the reverse).
_Settings = Any


def echo(value: object) -> str:
    """``repr(value)``, cut to :data:`ECHO_CHARS` (a 1 MB literal is not a 1 MB line)."""
    text = repr(value)
    if len(text) <= ECHO_CHARS:
        return text
    return f"{text[:ECHO_CHARS]}... ({len(text):,} characters)"


def check_settings(s: _Settings) -> None:
    """Every rule between settings; the first broken one raises."""
    if s.commit_interval * 1000 * 3 > s.transaction_timeout_ms:
        raise ValueError(
            f"commit_interval ({s.commit_interval}s) must stay well below "
            f"transaction_timeout_ms ({s.transaction_timeout_ms} ms): at most a third "
            f"of it, so a slow checkpoint never outlives its transaction. Lower "
            f"BRIDGE_COMMIT_INTERVAL or raise BRIDGE_TRANSACTION_TIMEOUT_MS."
        )
    if s.pipeline and s.pipeline_spec:
        raise ValueError("set either pipeline (module:attr) or pipeline_spec, not both")
    if s.pipeline and ":" not in s.pipeline:
        raise ValueError(f"pipeline must look like module:attr, got {echo(s.pipeline)}")
    check_topics(s)
    check_group_protocol(s)
    check_state_dir(s.state_dir)
    check_clients(s)


def check_topics(s: _Settings) -> None:
    """No output or dead-letter topic is an input topic of the same cluster: each record
    written there would be read again, for ever."""
    if s.cross_cluster:
        return
    loops = [out for out in s.output_topics.values() if out in s.input_topics]
    if loops:
        raise ValueError(
            f"output_topic {echo(s.output_topic)}: {loops[0]!r} is also an input topic"
        )
    if s.on_error == "dlq" and s.dead_letter_topic in s.input_topics:
        raise ValueError(
            f"dlq_topic (BRIDGE_DLQ_TOPIC) {s.dead_letter_topic!r} is also an input topic: "
            f"every dead letter would be read again; choose another dead-letter topic"
        )


def check_group_protocol(s: _Settings) -> None:
    """Under ``group_protocol: consumer`` (KIP-848) the broker sets the session timeout, the
    heartbeat and the assignor; librdkafka refuses the classic keys for them."""
    if s.group_protocol != "consumer":
        return
    sections = (("consumer", s.consumer), ("kafka", s.source().kafka))
    for section, values in sections:
        for key, broker_key in CLASSIC_ONLY_CONSUMER_KEYS.items():
            if key in values:
                raise ValueError(
                    f"{section}.{key} (BRIDGE_{section.upper()}) is a classic-protocol "
                    f"setting: under group_protocol=consumer the broker's {broker_key} "
                    f"replaces it; remove it or set BRIDGE_GROUP_PROTOCOL=classic"
                )


ENV = "BRIDGE_"  # app.config.ENV_PREFIX


def block_fields(model: type[BaseModel], block: str) -> list[str]:
    """The fields of the setting ``block`` of ``model`` when it is a block of fields
    (``schema_registry``: ``url``, ...), else none."""
    info = model.model_fields.get(block)
    kinds = (info.annotation, *get_args(info.annotation)) if info else ()
    return [
        name
        for kind in kinds
        if isinstance(kind, type) and issubclass(kind, BaseModel)
        for name in kind.model_fields
    ]


def env_of(model: type[BaseModel], loc: list[str]) -> str:
    """The variable of a setting (``BRIDGE_OUTPUT_TOPIC``) or of a block's field
    (``BRIDGE_SCHEMA_REGISTRY__URL``)."""
    if len(loc) == 2 and block_fields(model, loc[0]):
        return f"{ENV}{loc[0].upper()}__{loc[1].upper()}"
    return ENV + loc[0].upper()


def not_a_setting(model: type[BaseModel], loc: list[str]) -> str | None:
    """What to say of a name that is no setting (``loc`` one part) or no field of its block
    (two parts), with the closest one; None for deeper names."""
    if len(loc) == 1:
        close = difflib.get_close_matches(loc[0], list(model.model_fields), 1)
        return f"not a setting{f'; did you mean {close[0]!r}?' if close else ''}"
    if len(loc) == 2:
        close = difflib.get_close_matches(loc[1], block_fields(model, loc[0]), 1)
        meant = f"; did you mean {close[0]!r} ({env_of(model, [loc[0], close[0]])})?"
        return f"not a field of {loc[0]}{meant if close else ''}"
    return None


_REGISTRY_FORMATS = ("avro", "protobuf", "json_schema")  # app.serde.REGISTRY_FORMATS
_SCHEMA_OF = {  # the schema block of each format setting
    "input_schema": "input_format",
    "input_key_schema": "input_key_format",
    "output_schema": "output_format",
    "output_key_schema": "output_key_format",
}


def ineffective_settings(s: _Settings) -> list[str]:
    """One line per setting the user set that does nothing with the others (``run`` and
    ``check-config`` say them as warnings; the bridge runs as if it were not set)."""
    given = s.model_fields_set
    lines = []
    if "schema_ids" in given and not (s.output_format == "bytes" and s.target_registry):
        why = [] if s.output_format == "bytes" else [f"output_format is {s.output_format}"]
        why += [] if s.target_registry else ["no target_registry is set"]
        lines.append(
            f"schema_ids={s.schema_ids} (BRIDGE_SCHEMA_IDS) has no effect: it applies to "
            f"output_format=bytes with a target_registry, and {' and '.join(why)}"
        )
    for block, fmt in _SCHEMA_OF.items():
        if block in given and getattr(s, fmt) not in _REGISTRY_FORMATS:
            lines.append(
                f"{block} (BRIDGE_{block.upper()}) has no effect: {fmt} is {getattr(s, fmt)}, "
                f"not a registry format ({', '.join(_REGISTRY_FORMATS)})"
            )
    return lines


def check_state_dir(path: Path) -> None:
    """``state_dir`` can be a directory: no part of it is an existing file."""
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            raise ValueError(
                f"state_dir (BRIDGE_STATE_DIR) {echo(str(path))}: {str(part)!r} is not a "
                f"directory; choose a directory the bridge may create and write"
            )


def check_clients(s: _Settings) -> None:
    """librdkafka takes the ``consumer`` and ``producer`` values together with everything the
    bridge sets (asked without connecting: :mod:`app.kafka.probe`); a refused one is named as
    the user wrote it, its value masked when it may be a secret."""
    roles: list[tuple[Role, Any]] = [("consumer", s.consumer), ("producer", s.producer)]
    for role, own in roles:
        if not own:
            continue
        refused = refused_setting(role, _bridge_config(s, role), own)
        if refused is not None:
            key, reason = refused
            value = masked({key: own[key]})[key]
            raise ValueError(
                f"{role}.{key} (BRIDGE_{role.upper()}): librdkafka refuses {echo(value)}: "
                f"{reason[:ECHO_CHARS]}"
            )


def _bridge_config(s: _Settings, role: Role) -> dict[str, Any]:
    """What the bridge's ``role`` client is given besides the user's own section (the
    cluster's shared settings and the forced ones), without ``bootstrap.servers``."""
    if role == "consumer":
        common = dict(s.source().client_common())
        conf = consumer_config("", s.group_id, None, common, {}, s.group_protocol)
    else:
        txn_id = s.transactional_id if s.exactly_once else None
        common = dict(s.target_cluster().client_common())
        conf = producer_config("", txn_id, s.transaction_timeout_ms, True, common, {})
    conf.pop("bootstrap.servers")
    return conf


def yaml_problem(path: object, exc: Exception) -> str:
    """A YAML error as one line: ``file:line:column: what`` (PyYAML's own is five lines,
    quoting the offending line)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    text = f"{what} ({context})" if context else str(what)
    return f"{where}: not valid YAML: {' '.join(text.split())[:ECHO_CHARS]}"
