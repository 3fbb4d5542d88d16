"""Output values and keys as bytes, and the one rule for what cannot be encoded faithfully.

orjson refuses integers beyond 64 bits, non-string dict keys and unknown types (a
``JSONEncodeError``, which is a ``TypeError``), but writes NaN and ±inf as ``null`` without a
word: a value silently changed. :func:`has_non_finite` finds those; callers only run it when
the encoded bytes contain ``null`` (:data:`null_in`), so records without NaN/inf (or null) pay
one substring search.
"""

from __future__ import annotations

import re
from math import isfinite
from typing import Any

import orjson

from app.pipeline.errors import OutputNotEncodable
from app.pipeline.record import Row

# ``null_in(payload)``: whether the encoded bytes contain ``null``. Half the cost of
# ``b"null" in payload``, whose ``bytes.__contains__`` first tries (and fails, raising and
# clearing a TypeError) to read its operand as an integer.
null_in = re.compile(b"null").search


def encode_value(value: Any) -> bytes | None:
    """bytes as is, str as UTF-8, None as None (a tombstone), anything else as JSON."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return orjson.dumps(value)


def encode_output_key(key: Any) -> bytes | None:
    """bytes as is, None as None, anything else as its ``str`` in UTF-8."""
    if key is None or isinstance(key, bytes):
        return key
    return str(key).encode()


def header_bytes(headers: list[tuple[str, bytes | None]]) -> int:
    """What record headers add to the size of a produced record (names and values)."""
    return sum(len(k) + len(v or b"") for k, v in headers)


def has_non_finite(value: Any) -> bool:
    """True if ``value`` holds a float NaN or ±inf anywhere in its dicts and lists."""
    if isinstance(value, float):
        return not isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_non_finite(v) for v in value)
    return False


def not_encodable(row: Row, what: str, reason: BaseException | str) -> OutputNotEncodable:
    """The error for an output ``what`` ("value" or "key") of ``row`` that cannot be encoded."""
    return OutputNotEncodable(
        f"output {what} of {row.source_topic}[{row.partition}]@{row.offset} cannot be encoded "
        f"as JSON: {reason}"
    )


NON_FINITE = "it holds NaN or inf, which JSON cannot represent (the encoder would write null)"
