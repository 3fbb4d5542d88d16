"""The bounds README and its dead-letter table (docs/operations.md) state are the code's, each
pinned here: a state key of exactly 64 KiB is accepted (``over 64 KiB`` is StateKeyTooLarge),
a float ``sum`` is a double (past 2**63 too; only ±inf/NaN is AggregateOverflow), and
``dlq summary`` takes any source header."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.commands.dlq import summarize
from app.errors import StateKeyTooLarge
from app.kafka.topics import KafkaRecord
from app.pipeline.errors import INT64_MAX
from app.pipeline.stateful import Sum
from app.state.keys import MAX_STATE_KEY_BYTES, decode_key, encode_key
from tests.support.state import LocalAccess, row, run

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# The table of dead-letter classes, linked from README's "Dead letters".
CLASSES = (ROOT / "docs" / "operations.md").read_text()


@pytest.mark.parametrize("make", [lambda n: "k" * n, lambda n: b"k" * n])
def test_a_state_key_of_exactly_64_kib_is_accepted_and_one_byte_more_is_not(make: object) -> None:
    assert MAX_STATE_KEY_BYTES == 64 * 1024
    assert "over 64 KiB" in README and "over 64 KiB" in CLASSES
    key = make(64 * 1024)  # type: ignore[operator]
    assert decode_key(encode_key(key)) == key
    with pytest.raises(StateKeyTooLarge):
        encode_key(make(64 * 1024 + 1))  # type: ignore[operator]


def test_a_float_sum_past_2_to_the_63_is_a_double_not_an_overflow(tmp_path: Path) -> None:
    assert "for a sum of floats (a double, past 2**63 too), to ±inf/NaN" in CLASSES
    rows = [row({"n": v}, key="k", offset=i) for i, v in enumerate([9e18, 9e18, 1e308, 1e308])]
    out, ctx = run(Sum("n"), rows, LocalAccess(tmp_path))
    sums = [r.value["sum"] for r in out]
    assert sums[:2] == [9e18, 1.8e19] and sums[1] > INT64_MAX
    assert [(f.row.offset, type(f.error).__name__) for f in ctx.failures] == [
        (3, "AggregateOverflow")  # 1e308 + 1e308 would be inf
    ]


def letter(partition: bytes, offset: bytes = b"7") -> KafkaRecord:
    headers = (
        ("eos.dlq.source.topic", b"in"),
        ("eos.dlq.source.partition", partition),
        ("eos.dlq.source.offset", offset),
        ("eos.dlq.error.class", b"ValueError"),
        ("eos.dlq.error.step", b"map"),
    )
    return KafkaRecord("in.dlq", 0, 0, None, b"{}", headers, 0)


def test_dlq_summary_counts_a_letter_with_a_non_numeric_source_header() -> None:
    groups = summarize([letter(b"0"), letter(b"zero"), letter(b"1", b"seven")])
    group = groups[("map", "ValueError", "in")]
    assert group.count == 3
    assert group.first == {0: 7, -1: 7, 1: -1}
