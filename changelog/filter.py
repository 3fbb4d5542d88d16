"""The recovery filter rule, as a pure function (Quix Streams' ``_should_apply_changelog``).

A changelog record carries the input offsets it was computed from. If any of them is at or past
the group's committed input offset, the checkpoint that produced the record never committed its
input offsets: the input will be processed again, so applying the update would count it twice.

With exactly-once the rule is a safety net (an aborted checkpoint's changelog records are
invisible to read_committed anyway); with at-least-once it is what keeps state consistent.
"""

from __future__ import annotations

from collections.abc import Mapping

NO_COMMITTED_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group committed nothing yet


def should_apply(processed: Mapping[str, int] | None, committed: Mapping[str, int]) -> bool:
    """True when a changelog record's update belongs to committed input.

    Args:
        processed: the record's ``__processed_tp_offsets__`` (``None`` = header absent or
            ``null``: written without offset tracking, always applied).
        committed: the group's committed offset (next offset to read) per input topic for this
            partition; a missing topic or a negative offset means nothing is committed yet.

    Returns:
        False (skip) when some processed offset ≥ the committed offset of its topic.
    """
    if processed is None:
        return True
    for topic, offset in processed.items():
        bound = committed.get(topic, NO_COMMITTED_OFFSET)
        if bound < 0 or offset >= bound:
            return False
    return True
