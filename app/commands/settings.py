"""What the command line says about settings: ``--help`` tables and misspelled variables."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from enum import Enum
from typing import Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic_settings import BaseSettings

from app.config import ENV_PREFIX, BridgeSettings
from app.settings_checks import block_fields


def env_name(field: str) -> str:
    """The environment variable of a setting: ``BRIDGE_`` + the upper-cased name."""
    return ENV_PREFIX + field.upper()


def settings_epilog(model: type[BaseSettings], title: str = "settings") -> str:
    """A ``--help`` epilog listing every setting of ``model`` with its env variable."""
    rows = []
    for name, info in model.model_fields.items():
        default = (
            "required"
            if info.is_required()
            else _default(info.get_default(call_default_factory=True))
        )
        choices = _choices(info.annotation)
        allowed = f" ({'|'.join(choices)})" if choices else ""
        text = f"{info.description or name.replace('_', ' ')}{allowed} [{default}]"
        rows.append((env_name(name), text))
    width = max(len(env) for env, _ in rows)
    lines = [f"{title} (environment, or the same names in the --config file):"]
    lines += [f"  {env:<{width}}  {text}" for env, text in rows]
    lines.append(f"  {env_name('config_file'):<{width}}  YAML/JSON config file (like --config)")
    return "\n".join(lines)


def _choices(annotation: object) -> list[str]:
    """The allowed values of an enumerated setting (a ``Literal``), else none."""
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    return []


EXIT_CODES = """exit codes:
  0  stopped cleanly (SIGTERM/SIGINT, also while starting), everything processed is committed
  2  a setting, topic, credential or ACL is wrong (one line names it)
  3  fatal Kafka error, or a call or step stuck past its deadline: the restart recovers
  4  a record failed with on_error=fail (the line names topic/partition/offset)
  5  the group coordinator fenced this instance_id (another live instance uses it)"""


def _default(value: object) -> str:
    """A default as the user writes it: ``topic``, not ``<SubjectStrategy.TOPIC: 'topic'>``."""
    if value is None or value == {}:
        return "unset"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, BaseModel):
        fields = value.model_dump(mode="json")
        return " ".join(f"{name}={_default(one)}" for name, one in fields.items())
    return str(value)


def _blocks() -> dict[str, list[str]]:
    """The settings that are blocks of fields (``schema_registry``: ``url``, ...), longest
    name first, with their fields."""
    blocks = {name: block_fields(BridgeSettings, name) for name in BridgeSettings.model_fields}
    return dict(sorted(((n, f) for n, f in blocks.items() if f), key=lambda item: -len(item[0])))


_MAPS = ("kafka", "consumer", "producer")  # librdkafka maps: BRIDGE_KAFKA__<key>


def _closest(name: str) -> str | None:
    """The variable ``name`` (lower case, no prefix) most likely meant: a block's field
    written with one ``_`` where the block takes ``__`` (``schema_registry_url`` →
    ``BRIDGE_SCHEMA_REGISTRY__URL``, ``input_schema_file`` → ``..._SCHEMA__SCHEMA_FILE``), a
    librdkafka key of a map (``kafka_security_protocol`` → ``BRIDGE_KAFKA__security.protocol``),
    else the closest setting."""
    for block, fields in _blocks().items():
        if name.startswith(block + "_") and not name.startswith(block + "__"):
            rest = name[len(block) :].strip("_")
            close = difflib.get_close_matches(rest, fields, 1) or [
                f for f in fields if f.endswith("_" + rest)
            ]
            if close:
                return f"{env_name(block)}__{close[0].upper()}"
    for block in _MAPS:
        if name.startswith(block + "_") and not name.startswith(block + "__"):
            return f"{env_name(block)}__{name[len(block) :].strip('_').replace('_', '.')}"
    offered = [*BridgeSettings.model_fields, "config_file"]
    # Compared without the shared prefix, which would make every name look alike.
    close = difflib.get_close_matches(name, offered, 1)
    return env_name(close[0]) if close else None


def unknown_env_warnings(environ: Mapping[str, str]) -> list[str]:
    """One warning per ``BRIDGE_*`` variable that names no setting, with the closest one
    (a block's field when the name starts with the block: see :func:`_closest`).

    Nested maps are allowed (``BRIDGE_KAFKA__SECURITY.PROTOCOL``): only the part before the
    ``__`` must be a setting (a block's unknown field is the settings' own error).
    """
    known = {env_name(n) for n in BridgeSettings.model_fields} | {env_name("config_file")}
    warnings = []
    for var in sorted(environ):
        if not var.startswith(ENV_PREFIX):
            continue
        head = var.split("__", 1)[0] if "__" in var[len(ENV_PREFIX) :] else var
        if head in known:
            continue
        close = _closest(head.removeprefix(ENV_PREFIX).lower())
        hint = f"; did you mean {close}?" if close else ""
        warnings.append(f"{var} is not a setting of eos-bridge and is ignored{hint}")
    return warnings
