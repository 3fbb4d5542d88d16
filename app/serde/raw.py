"""Raw bytes: values and keys as the broker holds them."""

from __future__ import annotations

from typing import Any

from app.errors import OutputNotEncodable


class BytesCodec:
    """Input bytes untouched; on output bytes, str (UTF-8) and None (a tombstone).

    Args:
        lenient: any other value is written as its ``str`` in UTF-8 (the output key's rule: a
            ``key_by`` may return a number); otherwise it is :class:`OutputNotEncodable`.
    """

    name = "bytes"
    structured = False
    inline = None

    def __init__(self, *, lenient: bool = False) -> None:
        self._lenient = lenient

    def decode(self, data: bytes | None, topic: str) -> Any:
        return data

    def encode(self, value: Any, topic: str) -> bytes | None:
        if value is None or isinstance(value, bytes):
            return value
        if isinstance(value, str) or self._lenient:
            try:
                return str(value).encode()
            except Exception as exc:  # a lone surrogate; an object whose str() raises
                raise OutputNotEncodable(f"cannot be encoded as text: {exc}") from None
        raise OutputNotEncodable(
            f"format bytes writes bytes or text, not {type(value).__name__} "
            f"(choose output_format=json to write it as JSON)"
        )
