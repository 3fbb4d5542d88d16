"""A dead letter always fits its topic: what is cut, in which order, and how it is said."""

from __future__ import annotations

from app.sink.fitting import (
    H_HEADERS_DROPPED,
    H_KEY_DROPPED,
    H_VALUE_DROPPED,
    RECORD_OVERHEAD,
    fit,
)

OURS = [("eos.dlq.source.offset", b"7"), ("eos.dlq.error.class", b"OutputTooLarge")]
LIMIT = 10_000


def names(headers: list[tuple[str, bytes]]) -> list[str]:
    return [name for name, _ in headers]


def test_a_dead_letter_that_fits_is_kept_whole() -> None:
    letter = fit(b"v" * 100, b"k", [("trace", b"t")], OURS, LIMIT)
    assert (letter.value, letter.key) == (b"v" * 100, b"k")
    assert names(letter.headers) == ["trace", *names(OURS)]


def test_the_value_goes_first_and_is_said() -> None:
    letter = fit(b"v" * LIMIT, b"k", [("trace", b"t")], OURS, LIMIT)
    assert letter.value is None and letter.key == b"k"
    assert (H_VALUE_DROPPED, str(LIMIT).encode()) in letter.headers
    assert letter.size <= LIMIT - RECORD_OVERHEAD


def test_then_the_inputs_own_headers_then_the_key() -> None:
    huge_header = [("blob", b"h" * LIMIT)]
    letter = fit(b"v", b"k", huge_header, OURS, LIMIT)
    assert letter.key == b"k" and "blob" not in names(letter.headers)
    assert (H_HEADERS_DROPPED, str(4 + LIMIT).encode()) in letter.headers
    one_mib = b"k" * (1 << 20)
    letter = fit(b"v", one_mib, [], OURS, LIMIT)
    assert letter.key is None and letter.value is None
    assert (H_KEY_DROPPED, str(1 << 20).encode()) in letter.headers
    assert names(letter.headers)[: len(OURS)] == names(OURS)  # provenance always kept
    assert letter.size <= LIMIT - RECORD_OVERHEAD
