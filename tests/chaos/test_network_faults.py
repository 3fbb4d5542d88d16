"""Network faults between the bridge and the brokers, through Toxiproxy.

The bridge bootstraps through one proxy per broker and the brokers advertise the proxies'
ports, so every request of the bridge goes through them; the live reader and the test's own
clients talk to the brokers directly. A fault is held for a span defined by the fault itself
(e.g. "longer than the request timeout"), never as a synchronisation: what the test waits for
afterwards is always a condition (input committed, transactions closed).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tests.chaos import faults
from tests.chaos.scene import Scene

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

MakeScene = Callable[..., Scene]


@pytest.mark.parametrize("fault", ["latency", "blackhole-coordinator", "bandwidth", "reset-peer"])
def test_network_fault(scene_factory: MakeScene, fault: str) -> None:
    scene = scene_factory(proxied=True).start()
    scene.feed_and_commit(4000)
    faults.FAULTS[fault](scene, random.Random(14))
    assert scene.finish().records == scene.feeder.fed
