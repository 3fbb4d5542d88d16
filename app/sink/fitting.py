"""A dead letter always fits: what is cut from one that would not, and how that is said.

A dead letter too large for its topic would be refused, the transaction aborted and the batch
replayed with the same record, forever: the silent livelock one level down. So a dead letter
is measured against the smallest limit on its way (the producer's ``message.max.bytes`` and
the topics' ``max.message.bytes``) and cut, in this order, until it fits: the value, then the
input record's own headers, then the key. The provenance and error headers always stay (they
say where the input record still is), and one header per cut part gives its size.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.pipeline.record import header_bytes

Headers = list[tuple[str, bytes]]

# Kept free under a limit for the record's own framing (offsets, timestamp, varints) and the
# batch header (61 bytes) of a record batch that holds it alone.
RECORD_OVERHEAD = 512

H_VALUE_DROPPED = "eos.dlq.value.dropped.bytes"
H_HEADERS_DROPPED = "eos.dlq.headers.dropped.bytes"
H_KEY_DROPPED = "eos.dlq.key.dropped.bytes"


@dataclass(slots=True, frozen=True)
class DeadLetter:
    """One dead letter as it is produced."""

    value: bytes | None
    key: bytes | None
    headers: Headers

    @property
    def size(self) -> int:
        return len(self.value or b"") + len(self.key or b"") + header_bytes(self.headers)


def fit(
    value: bytes | None, key: bytes | None, own: Headers, ours: Headers, limit: int
) -> DeadLetter:
    """The dead letter of ``value``/``key`` with the input's ``own`` headers and ``ours``
    (provenance and error), cut down to at most ``limit - RECORD_OVERHEAD`` bytes."""
    budget = limit - RECORD_OVERHEAD
    letter = DeadLetter(value, key, [*own, *ours])
    if letter.size <= budget:
        return letter
    said: Headers = [(H_VALUE_DROPPED, str(len(value or b"")).encode())]
    letter = DeadLetter(None, key, [*own, *ours, *said])
    if letter.size <= budget:
        return letter
    said.append((H_HEADERS_DROPPED, str(header_bytes(own)).encode()))
    letter = DeadLetter(None, key, [*ours, *said])
    if letter.size <= budget:
        return letter
    said.append((H_KEY_DROPPED, str(len(key or b"")).encode()))
    return DeadLetter(None, None, [*ours, *said])
