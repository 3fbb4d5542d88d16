"""group_protocol=consumer (KIP-848) on a real broker: the group grows and shrinks with
incremental callbacks, exactly once; only the moved partitions are revoked."""

from __future__ import annotations

import re

import pytest

from tests.integration.test_bridge_eos import grow_and_shrink
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration


def _revoked_counts(logs: str) -> list[int]:
    """Partitions named by each "revoked [...]" line of a bridge's log."""
    return [line.count("(") for line in re.findall(r"revoked \[[^\]]*\]", logs)]


def test_the_group_grows_and_shrinks_incrementally(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    """1 -> 2 -> 1 instances under the consumer protocol: no eager assign (which librdkafka
    refuses there), exactly once, and the first instance gives up only what moved."""
    logs = grow_and_shrink(
        kafka, bridges, 10_000, group_protocol="consumer", static_membership=False
    )
    assert "Erroneous state" not in logs and "rebalance callback" not in logs, logs[-3000:]
    revoked = _revoked_counts(logs)
    assert revoked and 0 < revoked[0] < 4, revoked  # the first revoke: only the moved ones
