"""Wire formats per topic role (:mod:`app.serde.base`): :func:`codec_for` picks one by name."""

from __future__ import annotations

from app.serde.base import Codec, Formats, Inline, Role
from app.serde.json import JsonCodec
from app.serde.raw import BytesCodec

__all__ = [
    "FORMATS",
    "BytesCodec",
    "Codec",
    "Formats",
    "Inline",
    "JsonCodec",
    "Role",
    "codec_for",
    "formats",
]

FORMATS = ("json", "bytes")


def codec_for(fmt: str, role: Role) -> Codec:
    """The codec of format ``fmt`` for ``role`` (the settings' Literal types allow no other)."""
    if fmt == "json":
        return JsonCodec()
    if fmt == "bytes":
        return BytesCodec(lenient=role.is_key)
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def formats(
    value_in: str = "json", value_out: str = "json", key_in: str = "bytes", key_out: str = "bytes"
) -> Formats:
    """The codecs of the four roles by format name (today's defaults when none is given)."""
    return Formats(
        codec_for(value_in, Role.INPUT_VALUE),
        codec_for(value_out, Role.OUTPUT_VALUE),
        codec_for(key_in, Role.INPUT_KEY),
        codec_for(key_out, Role.OUTPUT_KEY),
    )
