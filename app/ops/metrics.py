"""Prometheus metrics of one bridge process (own registry, so tests can build several).

Names follow Prometheus' conventions: the unit last (``_records``, ``_seconds``), counters end
in ``_total``. README "Metrics" lists them; the chart's dashboard and alert rules use them, and
tests/integration/test_ops_kit.py checks every name they use against a live ``/metrics``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version

import confluent_kafka
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.ops.resources import Resources

# Late records per window step. Steps have no Metrics instance at hand, so they add to this
# process-wide tally (once per batch) and every registry exports it, as ProcessCollector does.
LATE_RECORDS: Tally[str] = Tally()


class _LateRecords(Collector):
    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "eos_bridge_late_records",
            "Records of a window step whose windows had all closed, by step (dropped or, with "
            "late_records=dlq, dead-lettered; aborted transactions included)",
            labels=["step"],
        )
        for step, count in sorted(LATE_RECORDS.items()):
            family.add_metric([step], count)
        yield family


class CommitAge(Collector):
    """``eos_bridge_partition_commit_age_seconds``: per assigned partition, seconds since its
    position last advanced in a committed transaction (or, before that, since it was
    assigned), computed when scraped. A partition that is not assigned has no series."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()  # the main loop writes, the HTTP server's thread reads

    def assigned(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Start the age of newly assigned partitions (those already known keep theirs)."""
        now = self._clock()
        with self._lock:
            for key in partitions:
                self._since.setdefault(key, now)

    def advanced(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Partitions whose position a committed transaction moved: their age is 0 again (only
        assigned ones: a partition revoked meanwhile gets no series back)."""
        now = self._clock()
        with self._lock:
            for key in partitions:
                if key in self._since:
                    self._since[key] = now

    def forget(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Partitions revoked or lost: their series go (another instance reports them now)."""
        with self._lock:
            for key in partitions:
                self._since.pop(key, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "eos_bridge_partition_commit_age_seconds",
            "Seconds since the partition's position last advanced in a committed transaction "
            "(since it was assigned, before that), per assigned partition",
            labels=["topic", "partition"],
        )
        now = self._clock()
        with self._lock:
            since = sorted(self._since.items())
        for (topic, partition), at in since:
            family.add_metric([topic, str(partition)], max(0.0, now - at))
        yield family


def _bridge_version() -> str:
    try:
        return version("eos-bridge")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class Metrics:
    """Every metric the bridge exports; updated per batch or per checkpoint, never per record."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # process_start_time_seconds & co.: the restart alert counts changes of the start time.
        ProcessCollector(registry=r)
        GCCollector(registry=r)  # python_gc_*: collections per generation (the soak samples them)
        r.register(_LateRecords())
        r.register(Resources())  # heap, RocksDB memory, librdkafka queues
        build = Gauge(
            "eos_bridge_build_info",
            "Always 1; the labels name the bridge, confluent-kafka and librdkafka versions",
            ["version", "confluent_kafka", "librdkafka"],
            registry=r,
        )
        versions = (str(confluent_kafka.__version__), confluent_kafka.libversion()[0])
        build.labels(_bridge_version(), *versions).set(1)
        self._records(r)
        self._checkpoints(r)
        self._rebalances(r)
        self._assignment(r)

    def _records(self, r: CollectorRegistry) -> None:
        self.records_in = Counter("eos_bridge_input_records", "Input records consumed", registry=r)
        self.records_out = Counter(
            "eos_bridge_output_records", "Output records produced", registry=r
        )
        self.dead_lettered = Counter(
            "eos_bridge_produced_dead_letter_records",
            "Records sent to the dead-letter topic, aborted transactions included",
            registry=r,
        )
        self.dead_letters = Counter(
            "eos_bridge_dead_letter_records",
            "Committed dead letters by step and error class (the eos.dlq.error.* headers)",
            ["step", "error_class"],
            registry=r,
        )
        self.dead_letter_ratio = Gauge(
            "eos_bridge_dead_letter_ratio",
            "Dead letters per input record over dead_letter_ratio_window, by step and error class",
            ["step", "error_class"],
            registry=r,
        )

    def _checkpoints(self, r: CollectorRegistry) -> None:
        self.checkpoints = Counter("eos_bridge_checkpoints", "Committed checkpoints", registry=r)
        self.checkpoints_pipelined = Counter(
            "eos_bridge_checkpoints_pipelined",
            "Checkpoints committed beside the next batch's pipeline (pipelined_commit)",
            registry=r,
        )
        self.last_checkpoint = Gauge(
            "eos_bridge_last_checkpoint_timestamp_seconds",
            "Unix time of the last committed checkpoint (the process start before the first)",
            registry=r,
        )
        self.last_checkpoint.set(time.time())
        self.aborts = Counter(
            "eos_bridge_transaction_aborts",
            "Aborted transactions by reason",
            ["reason"],
            registry=r,
        )
        self.commit_seconds = Histogram(
            "eos_bridge_checkpoint_duration_seconds",
            "Checkpoint duration (flush + offsets + commit + state)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.checkpoint_records = Histogram(
            "eos_bridge_checkpoint_records",
            "Input records per checkpoint",
            buckets=(1, 10, 100, 1000, 10_000, 100_000, 1_000_000),
            registry=r,
        )

    def _rebalances(self, r: CollectorRegistry) -> None:
        self.rebalances = Counter(
            "eos_bridge_rebalances", "Rebalance events by kind", ["kind"], registry=r
        )
        self.rebalance_seconds = Histogram(
            "eos_bridge_rebalance_callback_seconds",
            "Duration of the rebalance callbacks by kind (assign, revoke, lost); a revoke "
            "includes its commit",
            ["kind"],
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.rebalance_partitions = Counter(
            "eos_bridge_rebalance_partitions",
            "Partitions named by the rebalance callbacks by kind: under the classic protocol "
            "each callback names the whole assignment, under consumer (KIP-848) only the "
            "partitions added, revoked or lost",
            ["kind"],
            registry=r,
        )

    def _assignment(self, r: CollectorRegistry) -> None:
        self.lag = Gauge(
            "eos_bridge_consumer_lag_records",
            "Records behind the high watermark (last stable offset), per assigned partition",
            ["topic", "partition"],
            registry=r,
        )
        self.ready = Gauge("eos_bridge_ready", "1 when assigned, recovered and running", registry=r)
        self.recovery_remaining = Gauge(
            "eos_bridge_recovery_remaining_records",
            "Changelog records left to restore",
            ["topic", "partition"],
            registry=r,
        )
        self.commit_age = CommitAge()
        r.register(self.commit_age)

    def checkpoint_committed(self, seconds: float, records: int) -> None:
        self.checkpoints.inc()
        self.last_checkpoint.set(time.time())
        self.commit_seconds.observe(seconds)
        self.checkpoint_records.observe(records)

    def forget_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop the lag and commit age series of partitions this instance no longer owns, so a
        sum over every instance counts each partition once."""
        partitions = list(partitions)
        self.commit_age.forget(partitions)
        for topic, partition in partitions:
            # KeyError: never reported (revoked before its first update)
            with contextlib.suppress(KeyError):
                self.lag.remove(topic, str(partition))
