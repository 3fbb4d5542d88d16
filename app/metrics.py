"""Prometheus metrics of one bridge process (own registry, so tests can build several)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """Every metric the bridge exports; updated per batch or per checkpoint, never per record."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.records_in = Counter("eos_bridge_records_in", "Input records consumed", registry=r)
        self.records_out = Counter("eos_bridge_records_out", "Output records produced", registry=r)
        self.dead_lettered = Counter(
            "eos_bridge_records_dead_lettered", "Records sent to the dead-letter topic", registry=r
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
        self.checkpoints = Counter("eos_bridge_checkpoints", "Committed checkpoints", registry=r)
        self.aborts = Counter(
            "eos_bridge_transaction_aborts",
            "Aborted transactions by reason",
            ["reason"],
            registry=r,
        )
        self.rebalances = Counter(
            "eos_bridge_rebalances", "Rebalance events by kind", ["kind"], registry=r
        )
        self.commit_seconds = Histogram(
            "eos_bridge_commit_seconds",
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
        self.lag = Gauge(
            "eos_bridge_consumer_lag", "Records behind the high watermark", ["topic", "partition"],
            registry=r,
        )  # fmt: skip
        self.ready = Gauge("eos_bridge_ready", "1 when assigned, recovered and running", registry=r)
        self.recovery_remaining = Gauge(
            "eos_bridge_recovery_remaining",
            "Changelog records left to restore",
            ["topic", "partition"],
            registry=r,
        )

    def checkpoint_committed(self, seconds: float, records: int) -> None:
        self.checkpoints.inc()
        self.commit_seconds.observe(seconds)
        self.checkpoint_records.observe(records)
