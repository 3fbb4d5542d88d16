"""The unit a pipeline works on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class Row:
    """One record inside the pipeline: a decoded value plus where it came from and goes to.

    A plain ``__slots__`` class rather than a dataclass: one is made per input record on the
    hot path, and steps update ``value``/``key``/``topic`` in place.
    """

    __slots__ = (
        "headers",
        "key",
        "offset",
        "partition",
        "raw",
        "source_topic",
        "timestamp",
        "topic",
        "value",
    )

    def __init__(
        self,
        value: Any,
        key: Any,
        headers: list[tuple[str, bytes]] | None,
        source_topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        raw: bytes | None = None,
    ) -> None:
        self.value = value
        self.key = key
        self.headers = headers
        self.source_topic = source_topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.topic: str | None = None  # None = the configured output topic
        self.raw = raw  # the input value bytes, for the dead-letter topic

    def derive(self, value: Any) -> Row:
        """A new row with ``value`` and this row's key, headers, origin and route."""
        row = Row(
            value,
            self.key,
            self.headers,
            self.source_topic,
            self.partition,
            self.offset,
            self.timestamp,
            self.raw,
        )
        row.topic = self.topic
        return row

    def __repr__(self) -> str:
        return f"Row({self.source_topic}[{self.partition}]@{self.offset} key={self.key!r})"


@dataclass(slots=True, frozen=True)
class Failure:
    """A record that a step, the decoder or the output gave up on, with the reason."""

    row: Row
    step: str
    error: BaseException


def header_bytes(headers: Sequence[tuple[str, bytes | None]]) -> int:
    """What record headers add to the size of a produced record (names and values)."""
    return sum(len(k) + len(v or b"") for k, v in headers)
