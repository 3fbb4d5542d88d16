"""State key encoding: injective, reversible, and integer encoding sorts like the integers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.state.keys import decode_int, decode_key, display_key, encode_int, encode_key

scalar_keys = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)
json_keys = st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text()), max_size=3)


def _identity(key: object) -> tuple[type, object]:
    if isinstance(key, float) and key == 0.0:
        return float, 0.0  # -0.0 and 0.0 are one key
    return type(key), key


@given(scalar_keys)
def test_roundtrip(key: object) -> None:
    assert _identity(decode_key(encode_key(key))) == _identity(key)


@given(json_keys)
def test_json_keys_roundtrip(key: list[object]) -> None:
    assert decode_key(encode_key(key)) == key


@given(scalar_keys, scalar_keys)
def test_injective(a: object, b: object) -> None:
    assert (encode_key(a) == encode_key(b)) == (_identity(a) == _identity(b))


def test_types_are_kept_apart() -> None:
    keys = [encode_key(k) for k in ("1", b"1", 1, 1.0, True, None, [1])]
    assert len(set(keys)) == len(keys)


def test_dict_keys_are_order_independent() -> None:
    assert encode_key({"a": 1, "b": 2}) == encode_key({"b": 2, "a": 1})


def test_unencodable_key_raises_type_error() -> None:
    with pytest.raises(TypeError):
        encode_key(object())


def test_foreign_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="not an encoded state key"):
        decode_key(b"?abc")


ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(ints)
def test_int_roundtrip(n: int) -> None:
    assert len(encode_int(n)) == 8
    assert decode_int(encode_int(n)) == n


@given(ints, ints)
def test_int_byte_order_is_numeric_order(a: int, b: int) -> None:
    assert (encode_int(a) < encode_int(b)) == (a < b)


def test_display_key() -> None:
    assert display_key(b"user-1") == "user-1"
    assert display_key(7) == 7


def test_a_state_key_too_large_for_a_changelog_record_is_a_record_error() -> None:
    import pytest

    from app.errors import RecordError, StateKeyTooLarge
    from app.state.keys import MAX_STATE_KEY_BYTES, encode_key

    assert encode_key(b"k" * (MAX_STATE_KEY_BYTES - 1)).startswith(b"b")
    for key in (b"k" * (1 << 20), "é" * MAX_STATE_KEY_BYTES, {"blob": "x" * MAX_STATE_KEY_BYTES}):
        with pytest.raises(StateKeyTooLarge, match="state key of"):
            encode_key(key)
    assert issubclass(StateKeyTooLarge, RecordError)  # a dead letter, not a failed checkpoint
