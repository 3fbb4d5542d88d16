"""Changelog topic names: Quix Streams' internal-topic scheme.

Quix names a store's changelog ``changelog__<consumer group>--<input topic>--<store>``; we use the
same scheme so an operator who knows one knows the other, and so two bridges with different
``group_id`` never share a changelog.
"""

from __future__ import annotations

import re

from changelog.errors import ChangelogConfigError

# Kafka's own rule for topic names (kafka.common.internals.Topic): legal characters and length.
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


def changelog_prefix(group_id: str) -> str:
    """What every changelog topic of ``group_id`` starts with."""
    return f"changelog__{group_id}--"


def changelog_topic_name(group_id: str, input_topic: str, store: str) -> str:
    """The changelog topic of ``store`` for the partitions of ``input_topic``.

    Raises:
        ChangelogConfigError: the name would not be a legal Kafka topic name.
    """
    name = f"{changelog_prefix(group_id)}{input_topic}--{store}"
    if len(name) > MAX_TOPIC_LENGTH or not _LEGAL.match(name):
        raise ChangelogConfigError(
            f"changelog topic name {name!r} (from group_id={group_id!r}, input topic "
            f"{input_topic!r}, store {store!r}) is not a legal Kafka topic name: at most "
            f"{MAX_TOPIC_LENGTH} characters of [a-zA-Z0-9._-]. Shorten BRIDGE_GROUP_ID or the "
            f"store name."
        )
    return name


def validate_store_name(store: str, where: str) -> str:
    """Store names become part of topic names and directory names: keep them simple."""
    if not store or not _LEGAL.match(store) or store in {".", ".."}:
        raise ChangelogConfigError(
            f"{where}: store name {store!r} must be non-empty and use only [a-zA-Z0-9._-] "
            f"(it names a changelog topic and a directory)"
        )
    return store
