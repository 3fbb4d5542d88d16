"""Fixtures of the pipeline step tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.state import LocalAccess


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Callable[[str], LocalAccess]]:
    """``stores(name)``: the test's LocalAccess of that name, empty: opened on the first call
    and emptied on each later one, so that each hypothesis example starts from empty stores
    without opening RocksDB again (208 opens took 12-15 s in one test on a loaded machine)."""
    made: dict[str, LocalAccess] = {}

    def empty(name: str) -> LocalAccess:
        if name in made:
            made[name].clear()
        else:
            made[name] = LocalAccess(tmp_path / name)
        return made[name]

    yield empty
    for access in made.values():
        access.close()
