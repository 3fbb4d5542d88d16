"""A Schema Registry outage at the ladder's seams: a fake probe (the one-method seam), a fake
clock that the fake sleep advances, and the same fake transaction owner as the ladder's tests.
Nothing is dead-lettered; the transaction is aborted and rewound, ``/readyz`` is false while it
lasts, and an outage longer than the deadline is fatal, naming the registry."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.ladder import Ladder
from app.engine.outage import RegistryOutage
from app.errors import KafkaFatalError
from app.ops.health import Health
from app.ops.metrics import Metrics
from app.serde.registry import RegistryUnavailable
from app.sink.refusals import Refusals
from tests.unit.engine.test_ladder import Owner, Repair

DOWN = RegistryUnavailable("schema registry http://reg:8081 answered 503: down")


class Probe:
    """Fails ``failures`` times, then answers; counts the questions."""

    def __init__(self, failures: int) -> None:
        self.failures, self.asked = failures, 0

    def check(self) -> None:
        self.asked += 1
        if self.asked <= self.failures:
            raise RegistryUnavailable("schema registry http://reg:8081 unreachable")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.readiness: list[tuple[bool, str]] = []  # /readyz as seen during each pause

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.readiness.append(self.health.readiness())
        self.now += seconds

    health: Health


class Rig:
    def __init__(self, failures: int, deadline: float = 30.0) -> None:
        self.owner, self.repair, self.metrics = Owner(), Repair(), Metrics()
        self.probe, self.clock = Probe(failures), Clock()
        self.health = self.clock.health = Health(stale_after=30)
        self.health.set_ready(True, "assigned")
        self.outage = outage = RegistryOutage(
            self.probe, self.health, deadline, clock=self.clock, sleep=self.clock.sleep,
            backoff=(1.0, 4.0),
        )  # fmt: skip
        owner: Any = self.owner
        repair: Any = self.repair
        self.ladder = Ladder(owner, Refusals(), self.metrics, repair, outage)

    def aborts(self) -> float:
        value = self.metrics.registry.get_sample_value(
            "eos_bridge_transaction_aborts_total", {"reason": "registry_unavailable"}
        )
        return value or 0.0


def test_an_outage_aborts_rewinds_and_waits_not_ready_until_the_registry_answers() -> None:
    rig = Rig(failures=3)
    rig.ladder.react(DOWN)
    assert rig.owner.did == [("abort", True, True)]  # rewound: the batch is replayed
    assert rig.aborts() == 1
    assert rig.probe.asked == 4
    assert rig.clock.readiness and all(not ready for ready, _ in rig.clock.readiness)
    assert "schema registry unavailable" in rig.clock.readiness[0][1]
    assert "http://reg:8081" in rig.clock.readiness[0][1]
    assert rig.health.readiness() == (True, "assigned")  # as before the outage


def test_an_outage_longer_than_the_deadline_is_fatal_naming_the_registry() -> None:
    rig = Rig(failures=1_000, deadline=30.0)
    with pytest.raises(KafkaFatalError, match=r"http://reg:8081.*more than 30s \(call_timeout\)"):
        rig.ladder.react(DOWN)
    assert rig.owner.did == [("abort", True, True)]  # nothing half-written is left open
    assert not rig.health.readiness()[0]


def test_a_registry_that_answers_the_probe_but_keeps_failing_is_one_outage() -> None:
    rig = Rig(failures=0, deadline=30.0)
    with pytest.raises(KafkaFatalError):
        for _ in range(100):  # the replay fails again each time, 10 s apart
            rig.ladder.react(DOWN)
            rig.clock.now += 10
    assert 3 <= rig.aborts() <= 5


def test_a_later_outage_gets_a_deadline_of_its_own() -> None:
    rig = Rig(failures=0, deadline=30.0)
    for _ in range(5):  # each one an hour after the last
        rig.ladder.react(DOWN)
        rig.clock.now += 3600
    assert rig.aborts() == 5
    assert rig.health.readiness() == (True, "assigned")


def test_without_a_registry_format_it_is_raised() -> None:
    owner: Any = Owner()
    repair: Any = Repair()
    ladder = Ladder(owner, Refusals(), Metrics(), repair)
    with pytest.raises(RegistryUnavailable):
        ladder.react(DOWN)
    assert owner.did == []


def test_a_stop_request_ends_the_wait_without_waiting_for_the_registry() -> None:
    rig = Rig(failures=2, deadline=30.0)
    stopping = [True]
    rig.outage.stop_when(lambda: stopping[0] and rig.probe.asked >= 1)  # SIGTERM after a probe
    rig.ladder.react(DOWN)  # returns: the loop sees `stopping` and shuts down
    assert rig.owner.did == [("abort", True, True)]
    assert rig.probe.asked == 1
    stopping[0] = False  # (a shutdown that did not happen): the next outage is waited out
    rig.ladder.react(DOWN)
    assert rig.probe.asked == 3
