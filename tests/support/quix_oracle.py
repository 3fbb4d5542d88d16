"""Quix Streams' own changelog rules, answered from Quix's virtualenv (``make quix-venv``).

Run by :class:`tests.support.quix.QuixOracle` as ``.venv-quix/bin/python -m
tests.support.quix_oracle``: one JSON request per stdin line, one JSON answer per stdout line.
Quix pins an older confluent-kafka than the bridge, so it cannot be imported beside the
bridge; this process imports only Quix and the standard library. Bytes travel as hex.

Requests (``op``):

- ``constants``: Quix's changelog header names.
- ``dumps``: ``value`` encoded with Quix's JSON serialiser (the processed-offsets header).
- ``should_apply``: ``RecoveryPartition._should_apply_changelog`` for ``processed`` and
  ``committed``.
- ``recover``: ``records`` (key, value, offset, headers) fed through a real
  ``RecoveryPartition`` with ``committed`` input offsets; answers what Quix applied.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from quixstreams.state.metadata import (
    CHANGELOG_CF_MESSAGE_HEADER,
    CHANGELOG_PROCESSED_OFFSETS_MESSAGE_HEADER,
)
from quixstreams.state.recovery import RecoveryPartition
from quixstreams.utils.json import dumps as quix_dumps


def unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


class QuixMessage:
    """A changelog record in the shape Quix's recovery code reads (confluent Message methods)."""

    def __init__(self, record: dict[str, Any]) -> None:
        self._r = record

    def headers(self) -> list[tuple[str, bytes | None]]:
        return [(name, unhex(value)) for name, value in self._r["headers"]]

    def key(self) -> bytes | None:
        return unhex(self._r["key"])

    def value(self) -> bytes | None:
        return unhex(self._r["value"])

    def offset(self) -> int:
        return int(self._r["offset"])


class RecordingStorePartition:
    """The StorePartition side of Quix's RecoveryPartition: keeps what Quix decided to apply."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, bytes], bytes] = {}
        self.applied = 0

    def recover_from_changelog_message(
        self, cf_name: str, key: bytes, value: bytes | None, offset: int, **_: Any
    ) -> None:
        self.applied += 1
        if value is None:
            self.data.pop((cf_name, key), None)
        else:
            self.data[(cf_name, key)] = value

    def write_changelog_offset(self, offset: int) -> None:
        pass

    def get_changelog_offset(self) -> None:
        return None

    def has_incomplete_ttl_migration(self) -> bool:
        return False

    def complete_recovery(self) -> None:
        pass


def recover(records: list[dict[str, Any]], committed: dict[str, int]) -> dict[str, Any]:
    store = RecordingStorePartition()
    partition = RecoveryPartition("changelog", 0, store, committed, 0, 0)  # type: ignore[arg-type]
    for record in records:
        partition.recover_from_changelog_message(QuixMessage(record))  # type: ignore[arg-type]
    data = [[cf, key.hex(), value.hex()] for (cf, key), value in store.data.items()]
    return {"applied": store.applied, "data": data}


def should_apply(processed: dict[str, int] | None, committed: dict[str, int]) -> bool:
    # The rule is a method reading only _committed_offsets: call it unbound on a stand-in.
    fake = type("P", (), {"_committed_offsets": committed})()
    return bool(RecoveryPartition._should_apply_changelog(fake, processed_offsets=processed))


def answer(request: dict[str, Any]) -> Any:
    op = request["op"]
    if op == "constants":
        return {
            "cf_header": CHANGELOG_CF_MESSAGE_HEADER,
            "processed_offsets_header": CHANGELOG_PROCESSED_OFFSETS_MESSAGE_HEADER,
        }
    if op == "dumps":
        return quix_dumps(request["value"]).hex()
    if op == "should_apply":
        return should_apply(request["processed"], request["committed"])
    if op == "recover":
        return recover(request["records"], request["committed"])
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    for line in sys.stdin:
        print(json.dumps({"result": answer(json.loads(line))}), flush=True)


if __name__ == "__main__":
    main()
