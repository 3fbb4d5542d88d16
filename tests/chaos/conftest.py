"""Chaos fixtures: one 3-broker cluster behind Toxiproxy shared by every chaos test.

Starting three JVM brokers costs about a minute on a 2-core machine, so the cluster lives for
the session; each scenario uses its own topics and group, and heals the cluster (toxics removed,
brokers resumed or restarted, every partition back in sync on three brokers) before it checks
the oracle, so the next scenario starts from a whole cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.chaos.scene import Scene
from tests.support.chaos import Rig


@pytest.fixture(scope="session")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    shared = Rig(tmp_path_factory.mktemp("chaos")).start()
    try:
        yield shared
    finally:
        shared.stop()


@pytest.fixture
def scene_factory(rig: Rig, tmp_path: Path) -> Iterator[Callable[..., Scene]]:
    """Scenes on the shared rig; every bridge they started is stopped afterwards and the
    cluster is healed for the next test."""
    made: list[Scene] = []

    def make(**kwargs: object) -> Scene:
        scene = Scene(rig, tmp_path, **kwargs)  # type: ignore[arg-type]  # Scene checks them
        made.append(scene)
        return scene

    yield make
    for scene in made:
        scene.close()
    rig.heal()
