"""Input written by a transactional upstream producer: the bridge reads it read_committed, and
the group's lag ends at 0 even when the input ends with an aborted transaction."""

from __future__ import annotations

import orjson
import pytest

from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, bridge_topics, json_records, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

ABORTED = 200


def test_an_aborted_transaction_after_the_last_checkpoint_is_committed_past(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """Nothing is consumed after the last checkpoint, only skipped (the aborted records and
    the abort markers): the bridge still commits the positions past them, so lag tools and
    autoscalers see 0. The abort is written only once the group has caught up, so it always
    lands after the last checkpoint whatever the machine's speed."""
    src, out, dlq = bridge_topics(kafka, 2)
    values, keys = json_records(1000)
    kafka.seed(src, values, keys)
    settings = base_settings(kafka, src, out, dlq)
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    before = kafka.end_offsets(src)

    upstream = kafka.transactional_producer()
    upstream.begin_transaction()
    for i in range(ABORTED):
        upstream.produce(src, orjson.dumps({"id": f"aborted-{i}"}), partition=i % 2)
    assert upstream.flush(30) == 0  # in the log before the abort, not purged by it
    upstream.abort_transaction(30)

    after = kafka.end_offsets(src)
    assert after == kafka.end_offsets(src, read_committed=False)  # the abort is complete
    assert all(after[p] == before[p] + ABORTED // 2 + 1 for p in before)  # records + marker
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0
    assert sorted(r.value or b"" for r in kafka.read_all(out)) == sorted(values)
