"""ensure_changelog_topics against a topic another instance created a moment ago: metadata
without partitions (or leaders) yet is waited for, not taken for a partition-count mismatch."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from changelog.errors import ChangelogConfigError
from changelog.topics import ChangelogSpec, ensure_changelog_topics


class SettlingAdmin:
    """A topic whose metadata shows ``counts[i]`` partitions at the i-th listing (then the
    last), each with a leader; compacted."""

    def __init__(self, name: str, counts: list[int]) -> None:
        self.name, self.counts, self.listings = name, counts, 0

    def list_topics(self, *_: Any, **__: Any) -> SimpleNamespace:
        count = self.counts[min(self.listings, len(self.counts) - 1)]
        self.listings += 1
        parts = {p: SimpleNamespace(leader=1) for p in range(count)}
        return SimpleNamespace(topics={self.name: SimpleNamespace(error=None, partitions=parts)})

    def describe_configs(self, resources: list[Any]) -> dict[Any, Future[Any]]:
        future: Future[Any] = Future()
        future.set_result({"cleanup.policy": SimpleNamespace(value="compact")})
        return {resources[0]: future}


def test_a_topic_still_being_created_is_waited_for() -> None:
    admin = SettlingAdmin("cl", [0, 0, 4])
    ensure_changelog_topics(admin, [ChangelogSpec("cl", 4)], timeout=5)
    assert admin.listings >= 3


def test_a_settled_mismatch_is_still_refused() -> None:
    with pytest.raises(ChangelogConfigError, match="has 2 partitions but its input topic has 4"):
        ensure_changelog_topics(SettlingAdmin("cl", [0, 2]), [ChangelogSpec("cl", 4)], timeout=5)
