"""The hanging-transaction gauges: the gap per partition, and how long the LSO has stood still
with a gap (the bridge's own transactions move it at every checkpoint)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from app.ops.unstable import UnstableOffsets


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _sample(registry: CollectorRegistry, name: str, partition: int) -> float | None:
    return registry.get_sample_value(name, {"topic": "out", "partition": str(partition)})


def test_a_gap_whose_lso_stands_still_ages_and_ends_at_zero() -> None:
    answers = {("out", 0): (10, 10), ("out", 1): (10, 10)}
    clock, registry = Clock(), CollectorRegistry()
    unstable = UnstableOffsets(lambda: dict(answers), registry, clock=clock)
    unstable.tick()
    assert _sample(registry, "eos_bridge_output_unstable_offsets", 0) == 0
    answers[("out", 0)] = (13, 10)  # a foreign transaction opens at 10 and holds it
    answers[("out", 1)] = (20, 15)  # the bridge's own open transaction
    unstable.tick()
    clock.now += 40
    answers[("out", 0)] = (16, 10)  # more records after it, LSO still 10
    answers[("out", 1)] = (25, 20)  # ours committed (LSO moved), the next one open
    unstable.tick()
    assert _sample(registry, "eos_bridge_output_unstable_offsets", 0) == 6
    assert _sample(registry, "eos_bridge_output_unstable_seconds", 0) == 40
    assert _sample(registry, "eos_bridge_output_unstable_seconds", 1) == 0  # moved: restarts
    clock.now += 5
    answers[("out", 0)] = (17, 17)  # aborted: the LSO catches up
    unstable.tick()
    assert _sample(registry, "eos_bridge_output_unstable_offsets", 0) == 0
    assert _sample(registry, "eos_bridge_output_unstable_seconds", 0) == 0
