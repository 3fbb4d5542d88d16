"""One changelog partition's restore: the filter rule applied to runs of records that share
their headers, written into its sink as one batch per consumed slice.

:class:`changelog.recovery.Restorer` reads the records and hands each task its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import methodcaller
from typing import Any, Protocol

from changelog.errors import ChangelogReadError
from changelog.filter import should_apply
from changelog.format import (
    CF_HEADER,
    PROCESSED_OFFSETS_HEADER,
    VERSION_HEADER,
    check_format_version,
    decode_format_version,
    decode_processed_offsets,
)

_DECISION_MEMO_MAX = 10_000  # distinct header values whose filter decision is remembered

ChangelogRecord = tuple[bytes, bytes, bytes | None]  # column family, key, value (None = delete)
DEFAULT_CF_BYTES = b"default"
_HEADERS, _KEY, _VALUE = methodcaller("headers"), methodcaller("key"), methodcaller("value")


class ChangelogBatch(Protocol):
    """One atomic write being filled (a ``rocksdict.WriteBatch``): default column family."""

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...


class RestoreSink(Protocol):
    """Where a task writes what it restores (a store partition)."""

    def changelog_batch(self) -> ChangelogBatch:
        """A new empty batch; records of the ``default`` column family go straight in."""
        ...

    def apply_changelog(
        self, batch: ChangelogBatch, others: list[ChangelogRecord], last_offset: int
    ) -> None:
        """Add ``others`` (other column families) and the changelog offset ``last_offset`` to
        ``batch`` and write it atomically (it may skip the WAL: see :meth:`finish_restore`)."""

    def finish_restore(self) -> None:
        """The task is done: make every write so far durable, before processing writes."""


@dataclass(slots=True, frozen=True)
class RestoreProgress:
    """Where one changelog partition's restore stands (for logs, metrics and readiness)."""

    changelog: str
    partition: int
    position: int
    target: int
    applied: int
    skipped: int

    @property
    def remaining(self) -> int:
        return max(0, self.target - self.position)


@dataclass(slots=True)
class _Slice:
    """One consumed slice of a task's records being written: its columns, taken once, the
    batch the default column family goes into and the records of other column families."""

    messages: list[Any]
    keys: list[Any]
    values: list[Any]
    batch: ChangelogBatch
    others: list[ChangelogRecord]
    on_error: Callable[[Any, Any], None]


@dataclass(slots=True)
class RestoreTask:
    """One changelog partition restored into one sink.

    Args:
        changelog: changelog topic.
        partition: changelog partition (= input partition).
        start: first changelog offset to read (stored offset + 1, or the low watermark).
        target: done when the consumer position reaches it (end offset when the task began).
        committed: the group's committed offset per input topic for this partition.
        sink: receives every batch.
    """

    changelog: str
    partition: int
    start: int
    target: int
    committed: dict[str, int]
    sink: RestoreSink
    applied: int = 0
    skipped: int = 0
    position: int = -1
    decisions: dict[bytes, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.position = self.start

    @property
    def done(self) -> bool:
        return self.position >= self.target

    def progress(self) -> RestoreProgress:
        return RestoreProgress(
            self.changelog, self.partition, self.position, self.target, self.applied, self.skipped
        )

    def restore(self, messages: list[Any], on_error: Callable[[Any, Any], None]) -> None:
        """Filter one consumed run of this partition's records and write it to the sink.

        The hot loop of recovery runs in C-level passes (``map``, ``groupby``), not bytecode per
        record: one checkpoint's records share their headers, so the filter rule runs once per
        run of identical headers and a kept run goes into the batch with one ``map``.
        """
        slice_ = _Slice(
            messages, list(map(_KEY, messages)), list(map(_VALUE, messages)),
            self.sink.changelog_batch(), [], on_error,
        )  # fmt: skip
        headers = list(map(_HEADERS, messages))
        if headers.count(headers[0]) == len(headers):  # most batches: within one checkpoint
            runs: Any = ((headers[0], headers),)
        else:
            runs = groupby(headers)
        start = 0
        for common, same in runs:
            end = start + len(list(same))
            self._restore_run(slice_, common, start, end)
            start = end
        last = messages[-1]
        if last.error() is not None:  # rare: find the last real record for the offset
            real = [m for m in messages if m.error() is None]
            if not real:
                return
            last = real[-1]
        self.sink.apply_changelog(slice_.batch, slice_.others, last.offset())

    def _restore_run(self, s: _Slice, headers: Any, start: int, end: int) -> None:
        """Apply or skip ``s.messages[start:end]``, which all carry ``headers``."""
        cf, raw, version = _changelog_headers(headers)
        if version is not None:
            self._check_version(version, s.messages[start])
            if raw is None:
                self._offsets_header_missing(s.messages[start], version)
        if raw is not None and not self._decide(raw, s.messages[start]):
            self.skipped += end - start
            return
        keys, values = s.keys, s.values
        run_keys, run_values = keys[start:end], values[start:end]
        if cf is None or None in run_keys:  # error events or foreign records: one by one
            for i in range(start, end):
                if cf is None or keys[i] is None:
                    self._not_a_record(s.messages[i], cf, s.on_error)  # raises unless an event
                else:
                    self.applied += 1
                    self._apply_one(s.batch, s.others, cf, keys[i], values[i])
            return
        self.applied += end - start
        if cf != DEFAULT_CF_BYTES:
            s.others.extend(zip(repeat(cf), run_keys, run_values))
        elif None in run_values:  # tombstones
            for key, value in zip(run_keys, run_values, strict=True):
                self._apply_one(s.batch, s.others, cf, key, value)
        else:
            deque(map(s.batch.put, run_keys, run_values), maxlen=0)

    @staticmethod
    def _apply_one(
        batch: ChangelogBatch, others: list[ChangelogRecord], cf: bytes, key: bytes,
        value: bytes | None,
    ) -> None:  # fmt: skip
        if cf != DEFAULT_CF_BYTES:
            others.append((cf, key, value))
        elif value is None:
            batch.delete(key)
        else:
            batch.put(key, value)

    def _not_a_record(
        self, msg: Any, cf: bytes | None, on_error: Callable[[Any, Any], None]
    ) -> None:
        err = msg.error()
        if err is not None:
            on_error(err, msg)
            return
        raise ChangelogReadError(
            f"changelog {self.changelog}[{self.partition}]@{msg.offset()}: "
            f"{'no ' + CF_HEADER + ' header' if cf is None else 'record without key'}; "
            f"this topic was not written as a state changelog"
        )

    def _check_version(self, raw: bytes, msg: Any) -> None:
        """Refuse a record in a newer state format (version 1 is the only one so far: an
        older version would be translated here, before the filter rule reads the headers)."""
        where = f"changelog {self.changelog}[{self.partition}]@{msg.offset()}"
        try:
            version = decode_format_version(raw)
        except ValueError as exc:
            raise ChangelogReadError(f"{where}: {exc}") from None
        check_format_version(version, where)

    def _offsets_header_missing(self, msg: Any, version: bytes) -> None:
        """A versioned record always carries the processed offsets (``null`` when unknown):
        without them it is not in the format it names, e.g. a header renamed without a
        migration. Applied as "offsets unknown", it would pass the recovery filter and count an
        uncommitted checkpoint's update (at-least-once), so it stops the restore instead."""
        raise ChangelogReadError(
            f"changelog {self.changelog}[{self.partition}]@{msg.offset()}: a record of state "
            f"format {version.decode()} without a {PROCESSED_OFFSETS_HEADER} header; it "
            f"was not written in the format its {VERSION_HEADER} header names"
        )

    def _decide(self, raw: bytes, msg: Any) -> bool:
        keep = self.decisions.get(raw)
        if keep is not None:
            return keep
        try:
            keep = should_apply(decode_processed_offsets(raw), self.committed)
        except ValueError as exc:
            raise ChangelogReadError(
                f"changelog {self.changelog}[{self.partition}]@{msg.offset()}: {exc}"
            ) from None
        if len(self.decisions) >= _DECISION_MEMO_MAX:
            self.decisions.clear()
        self.decisions[raw] = keep
        return keep


_LAYOUT = (CF_HEADER, PROCESSED_OFFSETS_HEADER, VERSION_HEADER)
Found = tuple[bytes | None, bytes | None, bytes | None]


def _changelog_headers(headers: Any) -> Found:
    """(column family, processed offsets, format version) from headers in any order, each may
    be absent (no version: a record of format 1, written before the header or by Quix)."""
    try:  # the layout our writer writes: column family, processed offsets, version
        (cf_name, cf), (raw_name, raw), (v_name, version) = headers
        if (cf_name, raw_name, v_name) == _LAYOUT:
            return cf, raw, version
    except (TypeError, ValueError):
        pass
    cf = raw = version = None
    for name, value in headers or ():
        if name == CF_HEADER:
            cf = value
        elif name == PROCESSED_OFFSETS_HEADER:
            raw = value
        elif name == VERSION_HEADER:
            version = value
    return cf, raw, version
