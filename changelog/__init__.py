"""Changelog topics for state stores: naming, record format and headers (Quix Streams
compatible), topic creation, the checkpoint-time writer, the pure recovery filter rule and
recovery itself."""

from changelog.filter import should_apply
from changelog.format import (
    CF_HEADER,
    DEFAULT_CF,
    PROCESSED_OFFSETS_HEADER,
    STATE_FORMAT_VERSION,
    VERSION_HEADER,
    changelog_headers,
    decode_processed_offsets,
    encode_processed_offsets,
    processed_offset,
)
from changelog.naming import changelog_topic_name
from changelog.recovery import Restorer
from changelog.restore_task import RestoreProgress, RestoreTask
from changelog.topics import ChangelogSpec, ensure_changelog_topics
from changelog.writer import ChangelogWriter

__all__ = [
    "CF_HEADER",
    "DEFAULT_CF",
    "PROCESSED_OFFSETS_HEADER",
    "STATE_FORMAT_VERSION",
    "VERSION_HEADER",
    "ChangelogSpec",
    "ChangelogWriter",
    "RestoreProgress",
    "RestoreTask",
    "Restorer",
    "changelog_headers",
    "changelog_topic_name",
    "decode_processed_offsets",
    "encode_processed_offsets",
    "ensure_changelog_topics",
    "processed_offset",
    "should_apply",
]
