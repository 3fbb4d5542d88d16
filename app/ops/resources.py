"""Gauges of what a long run could grow: Python's heap, RocksDB's memory, librdkafka's queues.

Process-wide, like prometheus_client's ProcessCollector, so every registry exports them:
Python's allocated blocks and RocksDB's memory are read at scrape time (the state room
registers what it has open through :func:`register_memory_source`); librdkafka's queue sizes
come from its statistics callback (:func:`client_stats`, every ``STATS_INTERVAL_MS``) and
stand for the clients that reported within the last three intervals, so a closed or
re-created client drops out by itself.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

STATS_INTERVAL_MS = 10_000
_STALE_S = 3 * STATS_INTERVAL_MS / 1000

MemorySource = Callable[[], dict[str, int]]
_memory_sources: list[MemorySource] = []
_lock = threading.Lock()
# (role, librdkafka client name) -> (reported at, queued messages, queued bytes)
_queues: dict[tuple[str, str], tuple[float, int, int]] = {}


def register_memory_source(source: MemorySource) -> None:
    """``source()`` → bytes by kind (e.g. ``{"block_cache": n}``), summed over sources."""
    _memory_sources.append(source)


def client_stats(role: str) -> dict[str, Any]:
    """librdkafka settings that report ``role``'s queue sizes (``consumer``: messages fetched
    and not yet consumed; ``producer``: messages produced and not yet delivered)."""

    def on_stats(text: str) -> None:
        try:
            stats = json.loads(text)
            record_queue(role, str(stats.get("name", "")), *_queued(stats))
        except (ValueError, TypeError, AttributeError) as exc:  # never break the poll
            log.debug("unreadable librdkafka statistics from a %s: %s", role, exc)

    return {"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": on_stats}


def _queued(stats: dict[str, Any]) -> tuple[int, int]:
    if stats.get("type") == "producer":
        return int(stats.get("msg_cnt", 0)), int(stats.get("msg_size", 0))
    messages = size = 0
    for topic in stats.get("topics", {}).values():
        for partition in topic.get("partitions", {}).values():
            messages += int(partition.get("fetchq_cnt", 0))
            size += int(partition.get("fetchq_size", 0))
    return messages, size


def record_queue(
    role: str, client: str, messages: int, size: int, now: float | None = None
) -> None:
    now = time.monotonic() if now is None else now
    with _lock:
        _queues[(role, client)] = (now, messages, size)
        for key in [k for k, (at, _, _) in _queues.items() if now - at > _STALE_S]:
            del _queues[key]


def queue_totals(now: float | None = None) -> dict[str, tuple[int, int]]:
    """role → (messages, bytes) over the clients that reported recently."""
    now = time.monotonic() if now is None else now
    totals: dict[str, tuple[int, int]] = {}
    with _lock:
        for (role, _), (at, messages, size) in _queues.items():
            if now - at <= _STALE_S:
                m, s = totals.get(role, (0, 0))
                totals[role] = (m + messages, s + size)
    return totals


class Resources(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        heap = GaugeMetricFamily(
            "eos_bridge_python_allocated_blocks",
            "Memory blocks Python's allocator has handed out (sys.getallocatedblocks)",
        )
        heap.add_metric([], sys.getallocatedblocks())
        yield heap
        memory = GaugeMetricFamily(
            "eos_bridge_state_memory_bytes",
            "RocksDB memory of the state stores: block cache, memtables, table readers",
            labels=["kind"],
        )
        kinds: dict[str, int] = {}
        for source in _memory_sources:
            for kind, value in source().items():
                kinds[kind] = kinds.get(kind, 0) + value
        for kind, value in sorted(kinds.items()):
            memory.add_metric([kind], value)
        yield memory
        yield from self._queues()

    def _queues(self) -> Iterator[GaugeMetricFamily]:
        messages = GaugeMetricFamily(
            "eos_bridge_client_queue_messages",
            "Messages in librdkafka's queues (consumer: fetched, not consumed; producer: not "
            "yet delivered), from its statistics every 10 s",
            labels=["client"],
        )
        size = GaugeMetricFamily(
            "eos_bridge_client_queue_bytes", "Bytes of those messages", labels=["client"]
        )
        for role, (m, s) in sorted(queue_totals().items()):
            messages.add_metric([role], m)
            size.add_metric([role], s)
        yield messages
        yield size
