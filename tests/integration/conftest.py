"""Fixtures of the end-to-end tests: bridges as subprocesses, always stopped afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.bridge import BridgeProcess

MakeBridge = Callable[..., BridgeProcess]


@pytest.fixture
def bridges(tmp_path: Path) -> Iterator[MakeBridge]:
    """Factory of :class:`BridgeProcess` (settings as keyword arguments); each one is killed
    at teardown if the test left it running, and its log lives in the test's tmp_path."""
    started: list[BridgeProcess] = []

    def make(**settings: object) -> BridgeProcess:
        bridge = BridgeProcess(tmp_path, name=f"bridge-{len(started)}", **settings)
        started.append(bridge)
        return bridge

    yield make
    for bridge in started:
        bridge.stop()
