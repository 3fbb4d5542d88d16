"""The changelog record format, byte-compatible with Quix Streams 3.x.

A changelog record is ``key`` = the state key, ``value`` = the new value (``None`` = tombstone:
the key was deleted), and two headers, exactly as ``quixstreams.state`` writes them:

- ``__column_family__``: the RocksDB column family, UTF-8 (``default`` for our own steps);
- ``__processed_tp_offsets__``: JSON ``{"<input topic>": <offset>}`` (orjson, compact), the
  input offset up to which the update was computed; ``null`` or absent = unknown (always apply);

and a third, ours (Quix ignores headers it does not know):

- ``eos.state.v``: the state format version, ASCII digits. A record without it (written before
  the header existed, or by Quix) is version 1: today's format. A reader refuses a version newer
  than :data:`STATE_FORMAT_VERSION` (:func:`check_format_version`); the compatibility policy
  is in docs/state.md.

Which offset goes in the header: Quix writes the offset of the *last processed* input record and
commits that + 1. We commit ``consumer.position()`` and write ``position - 1``. That is the last
processed record's offset (exactly Quix's value), or a later one when the position stepped
over transaction markers. Either way it is below the offset this checkpoint commits and at or
above the offset the previous one committed, so the recovery rule (:mod:`changelog.filter`)
applies every committed checkpoint's records and skips those of failed checkpoints after the
last commit — as it does for Quix's header. (The values decide differently only for a failed
checkpoint whose input a *later* checkpoint committed at an offset inside the failed one's
trailing marker gap; its records are then superseded by the later checkpoint's records for the
same keys, so the restored state is the same. Property-tested in tests/unit.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from changelog.errors import ChangelogFormatError

CF_HEADER = "__column_family__"
PROCESSED_OFFSETS_HEADER = "__processed_tp_offsets__"
VERSION_HEADER = "eos.state.v"
DEFAULT_CF = "default"
# The state format this code writes and the newest it reads: the changelog record layout (key,
# value encodings, the headers above) and the RocksDB layout. Bump it (and add a migration to
# docs/state.md's table) whenever either changes.
STATE_FORMAT_VERSION = 1
LEGACY_FORMAT_VERSION = 1  # records and state directories written before versions existed
_VERSION_BYTES = str(STATE_FORMAT_VERSION).encode()

Headers = list[tuple[str, bytes]]


def processed_offset(position: int) -> int:
    """The header offset for a checkpoint that commits ``position`` (next offset to read)."""
    return position - 1


def encode_processed_offsets(offsets: Mapping[str, int] | None) -> bytes:
    """``{topic: offset}`` as Quix encodes it (``orjson.dumps``; ``None`` → ``b"null"``)."""
    return orjson.dumps(dict(offsets) if offsets is not None else None)


def decode_processed_offsets(raw: bytes | None) -> dict[str, int] | None:
    """Inverse of :func:`encode_processed_offsets`; absent header → ``None``.

    Raises:
        ValueError: the header is not JSON of the form ``{str: int}`` or ``null``.
    """
    if raw is None:
        return None
    parsed: Any = orjson.loads(raw)
    if parsed is None:
        return None
    if not isinstance(parsed, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in parsed.items()
    ):
        raise ValueError(f"{PROCESSED_OFFSETS_HEADER} is not {{topic: offset}}: {raw[:200]!r}")
    return parsed


def changelog_headers(cf: str, offsets: Mapping[str, int] | None) -> Headers:
    """The headers of one changelog record (Quix's two, then the format version)."""
    return [
        (CF_HEADER, cf.encode()),
        (PROCESSED_OFFSETS_HEADER, encode_processed_offsets(offsets)),
        (VERSION_HEADER, _VERSION_BYTES),
    ]


def decode_format_version(raw: bytes | None) -> int:
    """The version in an ``eos.state.v`` header; absent → :data:`LEGACY_FORMAT_VERSION`.

    Raises:
        ValueError: the header is not a positive decimal number.
    """
    if raw is None:
        return LEGACY_FORMAT_VERSION
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{VERSION_HEADER} is not a format version: {raw[:20]!r}")
    return int(raw)


def check_format_version(version: int, where: str) -> None:
    """Refuse state written in a format newer than this code reads.

    Raises:
        ChangelogFormatError: ``version`` > :data:`STATE_FORMAT_VERSION`; names ``where``.
    """
    if version > STATE_FORMAT_VERSION:
        raise ChangelogFormatError(
            f"{where}: state format version {version} is newer than this eos-bridge reads "
            f"(up to {STATE_FORMAT_VERSION}); run the version that wrote it or a later one "
            f"(docs/state.md, Upgrades)"
        )
