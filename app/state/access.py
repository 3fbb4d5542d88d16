"""What stateful steps see of state: one store's keys and values for one input partition.

The pipeline room depends on these protocols; the state room implements them
(:class:`app.state.cache.PartitionState` behind :class:`app.state.manager.RocksDBState`).
"""

from __future__ import annotations

from typing import Any, Protocol


class StateView(Protocol):
    """One store's key/value state for one input partition (uncommitted updates included).

    ``memo`` is the step's scratch space; it is cleared when updates are rolled back.
    """

    memo: dict[str, Any]

    def get(self, key: bytes) -> bytes | None: ...

    def set(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def scan(self, lower: bytes, upper: bytes) -> list[tuple[bytes, bytes]]:
        """Entries with ``lower <= key < upper`` in key order."""
        ...


class StateAccess(Protocol):
    """Per-partition key/value state for stateful steps."""

    def partition(self, store: str, topic: str, partition: int) -> StateView:
        """The state of ``store`` for the input partition a row came from."""
        ...
