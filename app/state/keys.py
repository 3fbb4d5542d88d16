"""State key encoding: pure functions, stable across restarts and versions.

Keys identify state inside one store partition, so they only need to be injective and stable.
A one-byte type tag keeps ``"1"``, ``b"1"`` and ``1`` apart; ``decode_key`` turns a stored key
back into the value a window result reports.

Integers used inside composite keys (window starts, expiry times) are 8 bytes, big-endian, with
the sign bit flipped ("offset binary"), so that byte order equals numeric order and a RocksDB
range scan visits them in time order.
"""

from __future__ import annotations

import struct
from typing import Any

from app.errors import StateKeyTooLarge
from app.serde import json

_U64 = struct.Struct(">Q")
_SIGN = 1 << 63
INT_WIDTH = 8

_NONE, _BYTES, _STR, _TRUE, _FALSE, _INT, _FLOAT, _JSON = (
    b"n",
    b"b",
    b"s",
    b"T",
    b"F",
    b"i",
    b"f",
    b"j",
)


# A state key goes to RocksDB and, with its value and headers, into one changelog record, which
# must fit the changelog topic (1 MB by default): keys beyond this are dead letters, so one
# record cannot make every checkpoint fail.
MAX_STATE_KEY_BYTES = 64 * 1024


def encode_key(key: Any) -> bytes:
    """Bytes that identify ``key`` (None, bytes, str, bool, int, float, or JSON-able).

    Raises:
        TypeError: the key is of a type that cannot be encoded (not JSON-able).
        StateKeyTooLarge: the encoded key is over :data:`MAX_STATE_KEY_BYTES`.
    """
    if isinstance(key, bytes):
        if len(key) > MAX_STATE_KEY_BYTES:
            raise _too_large(len(key))
        return _BYTES + key
    if isinstance(key, str):
        encoded = key.encode("utf-8", "surrogatepass")
        if len(encoded) > MAX_STATE_KEY_BYTES:
            raise _too_large(len(encoded))
        return _STR + encoded
    if key is None:
        return _NONE
    if isinstance(key, bool):
        return _TRUE if key else _FALSE
    if isinstance(key, int):
        return _INT + str(key).encode()
    if isinstance(key, float):
        return _FLOAT + repr(key + 0.0).encode()  # + 0.0 folds -0.0 into 0.0
    encoded = json.dumps(key, option=json.OPT_SORT_KEYS)
    if len(encoded) > MAX_STATE_KEY_BYTES:
        raise _too_large(len(encoded))
    return _JSON + encoded


def _too_large(size: int) -> StateKeyTooLarge:
    return StateKeyTooLarge(
        f"state key of {size} bytes, over {MAX_STATE_KEY_BYTES} (a store's key and its "
        f"changelog record must fit the changelog topic)"
    )


def decode_key(data: bytes) -> Any:
    """Inverse of :func:`encode_key` (JSON keys come back as JSON: tuples as lists).

    Raises:
        ValueError: ``data`` was not made by :func:`encode_key`.
    """
    tag, body = data[:1], data[1:]
    if tag == _BYTES:
        return body
    if tag == _STR:
        return body.decode("utf-8", "surrogatepass")
    if tag == _NONE:
        return None
    if tag in (_TRUE, _FALSE):
        return tag == _TRUE
    if tag == _INT:
        return int(body)
    if tag == _FLOAT:
        return float(body)
    if tag == _JSON:
        return json.loads(body)
    raise ValueError(f"not an encoded state key: {data[:40]!r}")


def encode_int(value: int) -> bytes:
    """8 bytes whose byte order is the numeric order of signed 64-bit ``value``."""
    return _U64.pack(value + _SIGN)


def decode_int(data: bytes) -> int:
    """Inverse of :func:`encode_int` (reads the first 8 bytes)."""
    return int(_U64.unpack_from(data)[0]) - _SIGN


def display_key(key: Any) -> Any:
    """A key as it appears in JSON output: bytes decoded as UTF-8, everything else as is."""
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else key
