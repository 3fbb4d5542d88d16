"""The pure changelog rules: filter, header encoding, naming — checked against Quix Streams
(asked of a process in Quix's own virtualenv, :class:`tests.support.quix.QuixOracle`)."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from changelog.errors import ChangelogConfigError, ChangelogFormatError
from changelog.filter import NO_COMMITTED_OFFSET, should_apply
from changelog.format import (
    CF_HEADER,
    PROCESSED_OFFSETS_HEADER,
    STATE_FORMAT_VERSION,
    VERSION_HEADER,
    changelog_headers,
    check_format_version,
    decode_format_version,
    decode_processed_offsets,
    encode_processed_offsets,
    processed_offset,
)
from changelog.naming import changelog_topic_name, validate_store_name
from tests.support.quix import QuixOracle

topics = st.sampled_from(["orders", "payments", "a.b-c_d"])
offsets = st.integers(min_value=0, max_value=10**12)


@pytest.fixture(scope="module")
def quix() -> Iterator[QuixOracle]:
    with QuixOracle() as oracle:
        yield oracle


def test_header_names_are_quix_streams_names(quix: QuixOracle) -> None:
    names = quix.ask("constants")
    assert names["cf_header"] == CF_HEADER
    assert names["processed_offsets_header"] == PROCESSED_OFFSETS_HEADER


@given(st.dictionaries(topics, offsets, max_size=3))
def test_processed_offsets_header_is_byte_identical_to_quix(
    quix: QuixOracle, offsets_: dict[str, int]
) -> None:
    assert encode_processed_offsets(offsets_) == bytes.fromhex(quix.ask("dumps", value=offsets_))
    assert decode_processed_offsets(encode_processed_offsets(offsets_)) == offsets_


def test_headers_of_a_record() -> None:
    headers = changelog_headers("default", {"orders": 41})
    assert headers == [
        (CF_HEADER, b"default"),
        (PROCESSED_OFFSETS_HEADER, b'{"orders":41}'),
        (VERSION_HEADER, str(STATE_FORMAT_VERSION).encode()),
    ], "Quix's two headers first, in Quix's order; the format version last"
    assert encode_processed_offsets(None) == b"null"
    assert decode_processed_offsets(None) is None
    assert decode_processed_offsets(b"null") is None


def test_format_version_header() -> None:
    assert decode_format_version(None) == 1, "no header: written before versions, format 1"
    assert decode_format_version(b"1") == 1
    assert decode_format_version(b"12") == 12
    for raw in (b"", b"0", b"-1", b"v2", b"1.5"):
        with pytest.raises(ValueError, match=r"eos\.state\.v"):
            decode_format_version(raw)


def test_a_newer_format_version_is_refused_naming_where() -> None:
    check_format_version(STATE_FORMAT_VERSION, "here")
    check_format_version(1, "here")
    with pytest.raises(ChangelogFormatError, match=r"^cl\[3\]@7: state format version 2 is newer"):
        check_format_version(STATE_FORMAT_VERSION + 1, "cl[3]@7")
    assert issubclass(ChangelogFormatError, ChangelogConfigError), "exit 2, like a config error"


@pytest.mark.parametrize("raw", [b"[1]", b'{"t": "x"}', b'{"t": true}', b"{"])
def test_malformed_processed_offsets_header_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        decode_processed_offsets(raw)


def test_filter_rule_examples() -> None:
    assert should_apply({"t": 9}, {"t": 10})  # checkpoint committed offset 10: apply
    assert not should_apply({"t": 10}, {"t": 10})  # produced, offsets never committed: skip
    assert not should_apply({"t": 50}, {"t": 10})
    assert should_apply(None, {"t": 10})  # no header: written without tracking
    assert should_apply({}, {})
    assert not should_apply({"t": 0}, {"t": NO_COMMITTED_OFFSET})  # group committed nothing
    assert not should_apply({"t": 0}, {})  # topic unknown = nothing committed


@given(
    st.dictionaries(topics, offsets, max_size=3),
    st.dictionaries(topics, st.one_of(offsets, st.just(NO_COMMITTED_OFFSET)), min_size=3),
)
def test_filter_rule_equals_quix_streams(
    quix: QuixOracle, processed: dict[str, int], committed: dict[str, int]
) -> None:
    committed = {
        t: committed.get(t, NO_COMMITTED_OFFSET) for t in ("orders", "payments", "a.b-c_d")
    }
    assert should_apply(processed, committed) == quix.should_apply(processed, committed)


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 3), st.booleans()), max_size=30))
def test_position_header_decides_like_last_processed_offset(
    quix: QuixOracle, checkpoints: list[tuple[int, int, bool]]
) -> None:
    """Each checkpoint processes n records, steps over m transaction markers, then commits or
    fails (and the input is rewound). Recovery then sees the final committed offset.

    Our header (position - 1) and Quix's (last processed offset) decide the same way for every
    changelog record; committed checkpoints are applied; failed checkpoints after the last
    commit are skipped. (A failed checkpoint *followed* by a commit past it is applied by both:
    its input was reprocessed and committed, and the later record of each key supersedes it.)
    """
    position, committed = 0, NO_COMMITTED_OFFSET
    history: list[tuple[int, int, bool]] = []
    for n, markers, commits in checkpoints:
        last_processed = position + n - 1
        position += n + markers
        history.append((processed_offset(position), last_processed, commits))
        if commits:
            committed = position
        else:
            position = max(committed, 0)  # aborted: rewind to the committed offset
    last_commit = max((i for i, (_, _, c) in enumerate(history) if c), default=-1)
    for i, (ours, quix_header, commits) in enumerate(history):
        decision = should_apply({"t": ours}, {"t": committed})
        if commits:
            assert decision
        elif i > last_commit:
            assert not decision
        if quix_header < committed <= ours:
            # The only disagreement: a failed checkpoint whose trailing marker gap holds the
            # final committed offset. A later checkpoint committed its input, so its records
            # are superseded by that checkpoint's own changelog records either way.
            assert not commits and i < last_commit
        else:
            assert decision == quix.should_apply({"t": quix_header}, {"t": committed})


def test_changelog_topic_name_follows_quix_scheme() -> None:
    assert changelog_topic_name("bridge", "orders", "count") == "changelog__bridge--orders--count"


def test_changelog_topic_name_too_long_names_the_setting() -> None:
    with pytest.raises(ChangelogConfigError, match="BRIDGE_GROUP_ID"):
        changelog_topic_name("g" * 240, "orders", "count")


@pytest.mark.parametrize("name", ["", "a/b", "..", "sp ace"])
def test_store_name_must_be_topic_safe(name: str) -> None:
    with pytest.raises(ChangelogConfigError, match="store name"):
        validate_store_name(name, "step 0")


def test_quix_json_encoding_is_compact() -> None:
    assert orjson.dumps({"a": 1}) == b'{"a":1}'
