"""Where a record the pipeline does not route goes: the output topic named after its input
topic (``output_topic`` as a template), and whether it keeps its input partition
(``keep_partition``). Pure rules, checked at start (MirrorMaker 2's replication policy and
its partition mapping, as settings).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from typing import Literal

from app.errors import ConfigError

FIELD = "topic"
KeepPartition = Literal["auto"] | bool
# Kafka's rule for topic names (kafka.common.internals.Topic): legal characters, length.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def is_template(name: str) -> bool:
    """``output_topic`` names its input topic (``{topic}``) rather than one topic."""
    return "{" in name or "}" in name


def render(template: str, topic: str) -> str:
    """The output topic of records read from ``topic`` (a plain name: itself)."""
    return template.replace("{" + FIELD + "}", topic) if is_template(template) else template


def check_template(template: str, inputs: Iterable[str]) -> None:
    """Refuse a template with a field other than ``{topic}``, or whose output topic for one of
    ``inputs`` is no legal topic name.

    Raises:
        ValueError: one line; pydantic prefixes the setting's name.
    """
    if not is_template(template):
        return
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template)]
    except ValueError as exc:  # an unmatched brace
        raise ValueError(f"template {template!r}: {exc}; the only field is {{topic}}") from None
    for name, spec, conv in fields:
        if name is not None and (name != FIELD or spec or conv):
            raise ValueError(
                f"template {template!r} has {{{name}{'!' + conv if conv else ''}"
                f"{':' + spec if spec else ''}}}; the only field is {{topic}}, e.g. "
                f"'{{topic}}' (same name) or 'source.{{topic}}'"
            )
    for topic in inputs:
        name = render(template, topic)
        if not _LEGAL.fullmatch(name) or name in (".", ".."):
            raise ValueError(
                f"template {template!r} makes {name!r} of input topic {topic!r}: not a legal "
                f"topic name (letters, digits, '.', '_', '-'; at most 249)"
            )


def output_topics(template: str, inputs: Iterable[str]) -> dict[str, str]:
    """Input topic → the output topic of its records that the pipeline does not route."""
    return {topic: render(template, topic) for topic in inputs}


def partition_mismatches(
    outputs: Mapping[str, str], counts_in: Mapping[str, int], counts_out: Mapping[str, int]
) -> list[str]:
    """One line per input topic whose output topic has another partition count."""
    return [
        f"input topic {topic!r} has {counts_in[topic]} partitions, its output topic {out!r} "
        f"has {counts_out[out]}"
        for topic, out in outputs.items()
        if topic in counts_in and out in counts_out and counts_in[topic] != counts_out[out]
    ]


def keeps_partition(setting: KeepPartition, mismatches: list[str]) -> bool:
    """Whether records keep their input partition: ``auto`` when every count matches.

    Raises:
        ConfigError: ``keep_partition=true`` and some counts differ (one line each, exit 2).
    """
    if setting is True and mismatches:
        raise ConfigError(
            "\n".join(
                f"keep_partition=true (BRIDGE_KEEP_PARTITION): {m}; add partitions to the output "
                f"topic or set keep_partition=auto"
                for m in mismatches
            )
        )
    return setting is True or (setting == "auto" and not mismatches)
