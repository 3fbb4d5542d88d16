"""group_protocol=consumer (KIP-848) on a real broker: the group grows and shrinks with
incremental callbacks, exactly once; only the moved partitions are revoked."""

from __future__ import annotations

import re

import pytest

from tests.integration.test_bridge_eos import _tagging, _topics, assert_exactly_once
from tests.support.bridge import json_records
from tests.support.feed import Feeder, feed_and_catch_up
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


def _revoked_counts(logs: str) -> list[int]:
    """Partitions named by each "revoked [...]" line of a bridge's log."""
    return [line.count("(") for line in re.findall(r"revoked \[[^\]]*\]", logs)]


def test_the_group_grows_and_shrinks_incrementally(kafka: KafkaFixture, bridges) -> None:  # type: ignore[no-untyped-def]
    """1 -> 2 -> 1 instances under the consumer protocol: no eager assign (which librdkafka
    refuses there), exactly once, and the first instance gives up only what moved."""
    src, out, dlq = _topics(kafka)
    feeder = Feeder(kafka, src, *json_records(30_000))
    settings = _tagging(kafka, src, out, dlq, group_protocol="consumer", static_membership=False)
    group = settings["group_id"]
    first = bridges(**settings).start()
    feed_and_catch_up(kafka, feeder, group, 10_000, [first])
    second = bridges(**{**settings, "instance_id": "i1"}).start()
    wait_until(lambda: "assigned" in second.logs() or not second.running(), 120, "second assigned")
    feeder.feed(5_000)  # under load: input arrives while the group settles
    feed_and_catch_up(kafka, feeder, group, 5_000, [first, second])
    assert second.terminate() == 0, second.logs()[-3000:]
    feed_and_catch_up(kafka, feeder, group, None, [first])
    assert first.terminate() == 0, first.logs()[-3000:]
    logs = first.logs()
    assert "Erroneous state" not in logs and "rebalance callback" not in logs, logs[-3000:]
    revoked = _revoked_counts(logs)
    assert revoked and all(0 < n < 4 for n in revoked[:1]), revoked  # only the moved ones
    assert_exactly_once(kafka, src, out)
