"""group_protocol=consumer (KIP-848) on a real broker: the group grows and shrinks with
incremental callbacks, exactly once; only the moved partitions are revoked."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from devkit.kafka import LocalKafka
from tests.integration.conftest import MakeBridge
from tests.integration.test_bridge_eos import assert_exactly_once, grow_and_shrink
from tests.support.bridge import base_settings, bridge_topics, json_records
from tests.support.feed import Feeder, feed_and_catch_up
from tests.support.kafka import KafkaFixture

GUARD_S = 180  # hang guard of every wait, never a timing claim

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


@pytest.fixture(scope="module")
def classic_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFixture]:
    """A Kafka 4.4 broker whose group coordinator speaks only the classic protocol, as brokers
    before 4.0 do (``group.coordinator.rebalance.protocols=classic``)."""
    cluster = LocalKafka(
        tmp_path_factory.mktemp("classic-only"),
        brokers=1,
        heap="256m",
        overrides={"group.coordinator.rebalance.protocols": "classic"},
    )
    cluster.start()
    try:
        yield KafkaFixture(cluster.bootstrap)
    finally:
        cluster.stop()


def test_a_broker_without_kip848_is_one_line_naming_the_setting_exit_2(
    classic_only: KafkaFixture, bridges: MakeBridge
) -> None:
    """Under the default protocol a coordinator without KIP-848 is a settings error: one
    line naming group_protocol and what to set, exit 2, no traceback (before: exit 5, "another
    live instance uses the same id", as librdkafka reports both with the same code)."""
    src, out, dlq = bridge_topics(classic_only)
    classic_only.seed(src, *json_records(10))
    bridge = bridges(**base_settings(classic_only, src, out, dlq)).start()
    assert bridge.wait(GUARD_S) == 2, bridge.logs()[-3000:]
    logs = bridge.logs()
    lines = [
        ln for ln in logs.splitlines() if "group_protocol=consumer (BRIDGE_GROUP_PROTOCOL)" in ln
    ]
    assert len(lines) == 1 and "BRIDGE_GROUP_PROTOCOL=classic" in lines[0], logs[-3000:]
    assert "Traceback" not in logs


def test_a_held_instance_id_is_released_and_a_live_twin_exits_5(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    """KIP-848 refuses a member whose group.instance.id another member still holds
    (UNRELEASED_INSTANCE_ID). A killed instance restarted at once removes its old member and
    joins in-process (no exit, no wait for the session timeout, as a classic static member
    replaces its old one) and goes on exactly once; a second live instance with the same id
    is refused again after its one removal, waits the session timeout and a margin, then exits
    5 with one line, while the first keeps going."""
    src, out, dlq = bridge_topics(kafka)
    feeder = Feeder(kafka, src, *json_records(6_000))
    s = base_settings(kafka, src, out, dlq, pipeline="tests.pipelines:tagged", batch_size=500)
    kafka.fast_handover(s, session_ms=4000)
    group = s["group_id"]
    first = bridges(**s).start()
    feed_and_catch_up(kafka, feeder, group, 2_000, [first])
    first.kill()  # SIGKILL: no leave, its member stays until the session expires
    restarted = bridges(**s).start()
    feed_and_catch_up(kafka, feeder, group, 2_000, [restarted])
    logs = restarted.logs()
    assert "removed it and joining again at once" in logs, logs[-3000:]
    assert restarted.running(), "the restarted instance joined in-process, without an exit"
    twin = bridges(**s).start()
    assert twin.wait(GUARD_S) == 5, twin.logs()[-3000:]
    twin_logs = twin.logs()
    fenced = [ln for ln in twin_logs.splitlines() if "longer than its session timeout" in ln]
    assert len(fenced) == 1 and "Traceback" not in twin_logs, twin_logs[-3000:]
    feed_and_catch_up(kafka, feeder, group, None, [restarted])  # the first kept going
    assert restarted.terminate() == 0, restarted.logs()[-3000:]
    assert_exactly_once(kafka, src, out)
