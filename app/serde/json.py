"""JSON (orjson): the bridge's default value format, and the one JSON implementation of the
service (state values, log lines and the tools use :func:`loads` / :func:`dumps` from here).

orjson refuses integers beyond 64 bits, non-string dict keys and unknown types (a
``JSONEncodeError``, which is a ``TypeError``), but writes NaN and ±inf as ``null`` without a
word: a value silently changed. :func:`has_non_finite` finds those; the encoder only runs it
when the bytes contain ``null`` (:data:`null_in`), so records without NaN/inf (or null) pay one
substring search.
"""

from __future__ import annotations

import re
from math import isfinite
from typing import Any

import orjson

from app.errors import DeserializationError, OutputNotEncodable
from app.serde.base import Inline

loads = orjson.loads
dumps = orjson.dumps
JSONDecodeError = orjson.JSONDecodeError
OPT_SORT_KEYS = orjson.OPT_SORT_KEYS

# ``null_in(payload)``: whether the encoded bytes contain ``null``. Half the cost of
# ``b"null" in payload``, whose ``bytes.__contains__`` first tries (and fails, raising and
# clearing a TypeError) to read its operand as an integer.
null_in = re.compile(b"null").search

NON_FINITE = "it holds NaN or inf, which JSON cannot represent (the encoder would write null)"


def has_non_finite(value: Any) -> bool:
    """True if ``value`` holds a float NaN or ±inf anywhere in its dicts and lists."""
    if isinstance(value, float):
        return not isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_non_finite(v) for v in value)
    return False


class JsonCodec:
    """Values as JSON; on output, bytes pass as they are, str as UTF-8 and None as a tombstone
    (a pipeline that hands back bytes or text meant them to be written as they are)."""

    name = "json"
    structured = True
    inline = Inline(loads, dumps, json=True)

    def decode(self, data: bytes | None, topic: str) -> Any:
        try:
            return loads(data)  # type: ignore[arg-type]  # None: a TypeError, mapped below
        except (JSONDecodeError, TypeError) as exc:
            raise DeserializationError(f"not JSON: {exc}") from None

    def encode(self, value: Any, topic: str) -> bytes | None:
        if type(value) is not dict:
            if value is None or isinstance(value, bytes):
                return value
            if isinstance(value, str):
                return _utf8(value)
        try:
            payload = dumps(value)
        except TypeError as exc:  # orjson.JSONEncodeError, or a str with a lone surrogate
            raise OutputNotEncodable(f"cannot be encoded as JSON: {exc}") from None
        if null_in(payload) and has_non_finite(value):
            raise OutputNotEncodable(f"cannot be encoded as JSON: {NON_FINITE}")
        return payload


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate
        raise OutputNotEncodable(f"cannot be encoded as UTF-8: {exc}") from None
