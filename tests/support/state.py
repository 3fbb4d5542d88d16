"""Real state stores for step tests, without Kafka: one PartitionState per (store, tp)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.pipeline.record import Row
from app.pipeline.steps import Step, StepContext
from app.state.cache import CacheBudget, PartitionState
from app.state.store import StorePartition


class LocalAccess:
    """StateAccess over RocksDB stores in ``root``; ``commit()`` mimics checkpoint step 5."""

    def __init__(self, root: Path, cache_max_bytes: int = 1 << 30) -> None:
        self.root = root
        self.budget = CacheBudget(cache_max_bytes)
        self.states: dict[tuple[str, str, int], PartitionState] = {}
        self.offset = 0

    def partition(self, store: str, topic: str, partition: int) -> PartitionState:
        key = (store, topic, partition)
        if key not in self.states:
            path = self.root / store / topic / str(partition)
            store_partition = StorePartition(path, f"{store} {topic}[{partition}]")
            self.states[key] = PartitionState(store_partition, "changelog", partition, self.budget)
        return self.states[key]

    def commit(self) -> None:
        """Steps 1 (set aside) and 5 (committed) of a checkpoint, no changelog."""
        for state in self.states.values():
            if state.dirty:
                self.offset += len(state.dirty)
                state.set_aside()
                state.mark_committed(self.offset, 0.0)

    def discard(self) -> None:
        for state in self.states.values():
            state.discard()

    def clear(self) -> None:
        """Forget every update, committed or not, keeping the stores open: a property test
        reuses one LocalAccess across its examples (a RocksDB open takes ~0.1 s under load)."""
        self.budget = CacheBudget(self.budget.cap)
        for key, state in self.states.items():
            db = state.store._db
            for committed in list(db.keys()):
                del db[committed]
            self.states[key] = PartitionState(
                state.store, state.changelog, state.partition, self.budget
            )

    def close(self) -> None:
        for state in self.states.values():
            state.store.close()
        self.states.clear()


def row(value: Any, key: Any = None, offset: int = 0, ts: int = 0, partition: int = 0) -> Row:
    return Row(value, key, None, "in", partition, offset, ts)


def run(step: Step, rows: list[Row], access: LocalAccess) -> tuple[list[Row], StepContext]:
    ctx = StepContext(retries=0, state=access)
    return step(rows, ctx), ctx
