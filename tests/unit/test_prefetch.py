"""tests/support/prefetch.py: which runs build the pinned tools in the background."""

from __future__ import annotations

import pytest

from tests.support import prefetch


class _Item:
    def __init__(self, *markers: str) -> None:
        self._markers = set(markers)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self._markers else None


def test_only_runs_with_chart_image_or_fault_tests_prefetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EOS_BRIDGE_NO_PREFETCH", raising=False)
    assert not prefetch.wanted([_Item(), _Item("integration")])  # type: ignore[list-item]
    assert prefetch.wanted([_Item(), _Item("chart")])  # type: ignore[list-item]
    assert prefetch.wanted([_Item("chaos", "integration")])  # type: ignore[list-item]
    monkeypatch.setenv("EOS_BRIDGE_NO_PREFETCH", "1")
    assert not prefetch.wanted([_Item("chart")])  # type: ignore[list-item]
