"""A registry away at start is waited for like a broker (app.serde.registry_probe): asked
again until it answers, and still away at the deadline it is ``RegistryUnavailable`` (exit 3,
the restart tries again), never a setting mistake (exit 2, which supervise does not restart)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from app.errors import ConfigError
from app.serde import registry_probe
from app.serde.registry import RegistrySettings, RegistryUnavailable
from app.serde.registry_probe import RegistryProbe


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Client:
    """Unreachable for the first ``away`` requests."""

    def __init__(self, away: int) -> None:
        self.away, self.asked = away, 0

    def get_subjects(self) -> list[str]:
        self.asked += 1
        if self.asked <= self.away:
            raise SchemaRegistryError(503, 50003, "registry starting")
        return []


def probe(client: Client) -> RegistryProbe:
    return RegistryProbe(RegistrySettings(url="http://registry:8081"), client)  # type: ignore[arg-type]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(registry_probe.time, "sleep", clock.sleep)
    return clock


def test_a_registry_back_before_the_deadline_is_waited_for(clock: Clock, caplog: Any) -> None:
    client = Client(away=5)
    probe(client).check_at_start(deadline=30.0, clock=clock)
    assert client.asked == 6
    assert sum("waiting up to startup_timeout" in r.message for r in caplog.records) == 1


def test_a_registry_away_past_the_deadline_is_unavailable_not_a_setting(clock: Clock) -> None:
    client = Client(away=10**6)
    with pytest.raises(RegistryUnavailable) as info:
        probe(client).check_at_start(deadline=30.0, clock=clock)
    assert not isinstance(info.value, ConfigError)
    assert "still unreachable at startup_timeout" in str(info.value)
    assert 29.0 <= clock.now <= 30.0  # asked until the deadline, not beyond
