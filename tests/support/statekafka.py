"""Drive the state backend against a real broker the way the loop does, without the loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.config import BridgeSettings
from app.engine.start import open_state
from app.pipeline import Pipeline
from app.sink.collector import RecordCollector
from app.state.manager import RocksDBState
from tests.support.kafka import KafkaFixture, wait_until


def state_settings(kafka: KafkaFixture, src: str, state_dir: Path, group: str) -> BridgeSettings:
    return BridgeSettings(
        bootstrap_servers=kafka.bootstrap,
        input_topics=[src],
        output_topic=f"{src}.out",
        group_id=group,
        state_dir=state_dir,
    )


def open_backend(settings: BridgeSettings, pipeline: Pipeline | None = None) -> RocksDBState:
    backend = open_state(settings, pipeline or Pipeline().count())
    assert isinstance(backend, RocksDBState)
    return backend


def recover_all(
    backend: RocksDBState, partitions: list[tuple[str, int]], committed: int, timeout: float = 60
) -> None:
    """assign + recover until done, as the loop does (committed offset per partition)."""
    backend.assign(partitions)
    offsets = {tp: committed for tp in partitions}
    wait_until(lambda: backend.recover(offsets, 0.5), timeout, f"recovery of {partitions}")


def checkpoint(
    backend: RocksDBState, producer: Any, positions: dict[tuple[str, int], int], commit: bool = True
) -> None:
    """Checkpoint steps 1, 2, 4, 5 with a real transactional producer (offsets not sent)."""
    producer.begin_transaction()
    collector = RecordCollector(producer)
    backend.produce_changelogs(collector, positions)
    collector.flush(30)
    backend.verify_delivery()
    if commit:
        producer.commit_transaction(30)
        backend.after_commit()
    else:
        producer.abort_transaction(30)
        backend.discard()
