"""JSON (orjson): the bridge's default value format, and the one JSON implementation of the
service (state values, log lines and the tools use :func:`loads` / :func:`dumps` from here).

orjson refuses integers beyond 64 bits, non-string dict keys and unknown types (a
``JSONEncodeError``, which is a ``TypeError``), but writes NaN and ±inf as ``null`` without a
word: a value silently changed. :func:`has_non_finite` finds those; the encoder only runs it
when the bytes contain ``null`` (:data:`null_in`), so records without NaN/inf (or null) pay one
substring search.

orjson also *decodes* an integer outside [-2**63, 2**64 - 1] as a float: 2**64 + 1 becomes
1.8446744073709552e+19, a value silently changed too. Such a float (|x| >= 1e16) is written
with an exponent, ``e+``: an output whose bytes hold a ``+`` (one ``find``), whose value holds
a float that large and whose input holds a run of 20 digits and signs
(:func:`long_number_in`) is refused (:data:`LONG_INTEGER`, ``OutputNotEncodable``) rather than
written rewritten. A pipeline without steps writes its input's bytes as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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

# Digits and "-" → "0", everything else → " ": a run of 20 zeros is a number token orjson may
# not hold exactly (19 digits and a sign: below -2**63; 20 digits: maybe above 2**64 - 1).
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 or b == 0x2D else 0x20 for b in range(256))
_LONG = b"0" * 20
_INT64_LIMIT = 2.0**63  # orjson decodes integers from -2**63 to 2**64 - 1 exactly


def long_number_in(data: bytes | None) -> bool:
    """Whether ``data`` may hold an integer orjson decodes as a float (a run of 20 digits or
    signs; in a string too, which only costs such a record a closer look)."""
    return data is not None and data.translate(_DIGITS).find(_LONG) >= 0


def rewritten(payload: bytes, value: Any, raw: bytes | None) -> bool:
    """Whether ``payload`` (``value`` encoded) may hold a float orjson made of an integer of
    ``raw`` beyond 64 bits: an exponent in the output, a float of that size in the value and a
    long number in the input."""
    return payload.find(b"+") >= 0 and long_number_in(raw) and _has_big_float(value)


def _has_big_float(value: Any) -> bool:
    if isinstance(value, float):
        return not -_INT64_LIMIT < value < _INT64_LIMIT
    if isinstance(value, dict):
        return any(_has_big_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_big_float(v) for v in value)
    return False


LONG_INTEGER = (
    "its input holds an integer beyond 64 bits, which the JSON decoder turns into a float "
    "(the output would hold a rewritten value)"
)
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


def verbatim(value_in: object, value_out: object) -> Callable[[bytes | None, str], Any] | None:
    """For a pipeline without steps, JSON in and out: a decode that checks a record is JSON
    and hands on its bytes, written as they are (no number, spacing or key order rewritten).
    None for any other pair of formats."""
    if type(value_in) is not JsonCodec or type(value_out) is not JsonCodec:
        return None
    decode = value_in.decode

    def checked(data: bytes | None, topic: str) -> bytes | None:
        decode(data, topic)
        return data

    return checked
