"""What the command line says about settings: ``--help`` tables and misspelled variables."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from enum import Enum
from typing import Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic_settings import BaseSettings

from app.config import ENV_PREFIX, BridgeSettings


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


def unknown_env_warnings(environ: Mapping[str, str]) -> list[str]:
    """One warning per ``BRIDGE_*`` variable that names no setting, with the closest one.

    Nested maps are allowed (``BRIDGE_KAFKA__SECURITY.PROTOCOL``): only the part before the
    ``__`` must be a setting.
    """
    offered = [*BridgeSettings.model_fields, "config_file"]
    known = {env_name(n) for n in BridgeSettings.model_fields} | {env_name("config_file")}
    warnings = []
    for var in sorted(environ):
        if not var.startswith(ENV_PREFIX):
            continue
        head = var.split("__", 1)[0] if "__" in var[len(ENV_PREFIX) :] else var
        if head in known:
            continue
        # Compared without the shared prefix, which would make every name look alike.
        close = difflib.get_close_matches(head.removeprefix(ENV_PREFIX).lower(), offered, 1)
        hint = f"; did you mean {env_name(close[0])}?" if close else ""
        warnings.append(f"{var} is not a setting of eos-bridge and is ignored{hint}")
    return warnings
