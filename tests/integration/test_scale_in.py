"""Scale-in of static members on a real broker (issue 54, acceptance 2): an instance that stops
for good removes its static member (``leave_group_on_shutdown``, app.kafka.leave), so its
partitions are committed again by the other instance long before the broker's session timeout;
an instance restarted without leaving moves nothing. Exactly once for a read_committed reader,
with records fed while the group changes; under both group protocols, and for a count."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.test_bridge_eos import _topics, assert_exactly_once
from tests.integration.test_state_e2e import assert_counts_exact
from tests.support.bridge import BridgeProcess, base_settings, json_records, wait_caught_up
from tests.support.feed import Feeder, feed_and_catch_up
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration

# The broker's default session timeouts (classic session.timeout.ms as librdkafka sends it,
# KIP-848 group.consumer.session.timeout.ms): what a departed static member costs without
# the leave.
SESSION_TIMEOUT_S = 45.0
PHASE = 2_000


def _static_members(kafka: KafkaFixture, group: str) -> set[str]:
    """The group.instance.id of every member the coordinator lists for ``group``."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    return {m.group_instance_id for m in future.result(timeout=15).members if m.group_instance_id}


def _assigned_after(bridge: BridgeProcess, mark: int) -> list[str]:
    """The "assigned ..." lines ``bridge`` logged after the first ``mark`` characters."""
    return [line for line in bridge.logs()[mark:].splitlines() if "assigned [" in line]


@pytest.mark.parametrize(
    ("protocol", "pipeline"),
    # Each protocol once (CI covers a behaviour once); consumer + stateless measured apart:
    # docs/operations.md, "Scale-in and static membership".
    [("classic", "stateless"), ("consumer", "count")],
)
def test_scale_in_moves_now_and_a_restart_moves_nothing(  # type: ignore[no-untyped-def]
    kafka: KafkaFixture, bridges, tmp_path: Path, protocol: str, pipeline: str
) -> None:
    """Stateless (the tagging pipeline) under both protocols; a count (its moved partitions
    restore from the changelog before they progress) under consumer, the count checked against
    the input."""
    src, out, dlq = _topics(kafka)
    feeder = Feeder(kafka, src, *json_records(6 * PHASE))
    code = "tests.state_pipelines:counting" if pipeline == "count" else "tests.pipelines:tagged"
    settings = base_settings(
        kafka, src, out, dlq, pipeline=code, batch_size=500, group_protocol=protocol,
        static_membership=True, leave_group_on_shutdown="never",
        state_dir=str(tmp_path / "state-i0"),
    )  # fmt: skip
    group = settings["group_id"]
    first = bridges(**settings).start()
    feed_and_catch_up(kafka, feeder, group, PHASE, [first])
    second = bridges(
        **{**settings, "instance_id": "i1", "state_dir": str(tmp_path / "state-i1")}
    ).start()
    wait_until(lambda: "assigned [(" in second.logs() or not second.running(), 60, "i1 assigned")
    feed_and_catch_up(kafka, feeder, group, PHASE, [first, second])

    # A restart within the session timeout, leaving off: i1 gets its partitions back, i0 is
    # not given any (no rebalance reaches it). i1 comes back with leaving on, for what follows.
    mark = len(first.logs())
    assert second.terminate() == 0, second.logs()[-3000:]
    assert "removed static member" not in second.logs(), second.logs()[-2000:]
    second.settings["leave_group_on_shutdown"] = "always"
    second.start()
    # (back within the session timeout: a restart takes seconds; the wait is only a guard)
    feed_and_catch_up(kafka, feeder, group, PHASE, [first, second], timeout=4 * SESSION_TIMEOUT_S)
    assert _assigned_after(first, mark) == [], first.logs()[mark:][-3000:]

    # Scale-in: SIGTERM i1 (leaving on) while records arrive; i0 commits every partition's
    # new records (i1's included) well before the session timeout would have moved them.
    before = kafka.committed_offsets(group, src)
    sent = time.monotonic()
    os.kill(second.pid, signal.SIGTERM)
    feeder.feed(PHASE)
    assert second.wait(60) == 0, second.logs()[-3000:]
    assert "removed static member 'i1'" in second.logs(), second.logs()[-3000:]
    # At once, not after the session timeout: the coordinator no longer lists i1 (without the
    # leave it keeps the departed static member, and its partitions, for that timeout).
    assert "i1" not in _static_members(kafka, group)
    wait_caught_up(kafka, group, src, 4 * SESSION_TIMEOUT_S, [first])
    gap = time.monotonic() - sent
    print(f"{protocol}, {pipeline}: every partition committed again {gap:.1f}s after the SIGTERM")
    moved = [line for line in _assigned_after(first, mark) if line]
    assert moved, first.logs()[mark:][-3000:]  # i0 was given i1's partitions
    after = kafka.committed_offsets(group, src)
    assert all(after[p] > before.get(p, -1) for p in after), (before, after)

    feed_and_catch_up(kafka, feeder, group, PHASE, [first])
    assert first.terminate() == 0, first.logs()[-3000:]
    if pipeline == "count":
        assert_counts_exact(kafka, src, out)
    else:
        assert_exactly_once(kafka, src, out)
