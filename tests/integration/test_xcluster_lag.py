"""Lag between two clusters (docs/cross-cluster.md): the ``lag`` command and the
``eos_bridge_consumer_lag_records`` gauge measure the bridge's committed positions against the
SOURCE cluster's end offsets. The source is the session broker (``kafka``), the target a
second one (``target_kafka``); the output topic has the input's name on the target and holds
other records already, so a lag measured against the target's ends would not be 0."""

from __future__ import annotations

import pytest

from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, json_records, metric, metrics_when
from tests.support.cli import Result, eos_bridge
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.xcluster import alive, xcaught_up

pytestmark = pytest.mark.integration

LAG = "eos_bridge_consumer_lag_records"


def _lag(*args: str, env: dict[str, str]) -> tuple[Result, dict[int, list[int]]]:
    """``eos-bridge lag ARGS``: the result and, per partition, [committed, end, lag]."""
    result = eos_bridge("lag", *args, env=env)
    rows = [line.split() for line in result.stdout.splitlines()[1:-1]]
    return result, {int(r[1]): [int(r[2]), int(r[3]), int(r[4])] for r in rows}


def _series(text: str, topic: str, partition: int) -> bool:
    """The exposition has the lag series of ``topic[partition]`` (labels in any order)."""
    labels = (f'topic="{topic}"', f'partition="{partition}"')
    return any(
        line.startswith(LAG + "{") and all(label in line for label in labels)
        for line in text.splitlines()
    )


def test_lag_across_clusters_is_measured_against_the_source(
    kafka: KafkaFixture, target_kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    src = kafka.create_topic(kafka.unique("lag-in"), 2)
    target_kafka.create_topic(src, 2)  # the same name on the target (MirrorMaker's habit)
    target_kafka.seed(src, [b'{"other": 1}'] * 300, partition=0)
    target_kafka.seed(src, [b'{"other": 2}'] * 200, partition=1)
    dlq = target_kafka.create_topic(target_kafka.unique("lag-dlq"), 1)
    values, keys = json_records(1_000)
    kafka.seed(src, values, keys)
    port = free_port()
    s = base_settings(
        kafka, src, src, dlq, http_port=port, target={"bootstrap_servers": target_kafka.bootstrap}
    )
    bridge = bridges(**s).start()
    wait_until(lambda: alive([bridge]) or xcaught_up(kafka, target_kafka, s), 180, "caught up")
    ends = kafka.end_offsets(src, read_committed=False)
    assert sum(ends.values()) == 1_000 and all(ends.values())

    # The gauge: one series per source partition, 0 once the last checkpoint is committed.
    metrics_when(
        port,
        lambda t: all(_series(t, src, p) for p in ends) and metric(t, LAG) == 0,
        "a lag series per source partition, at 0",
    )
    two = {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap,
           "BRIDGE_TARGET__BOOTSTRAP_SERVERS": target_kafka.bootstrap}  # fmt: skip
    result, rows = _lag(s["group_id"], env=two)
    assert result.code == 0, result.stderr
    assert rows == {p: [end, end, 0] for p, end in ends.items()}
    assert f"positions in the offsets topic '{s['group_id']}.offsets'" in result.stderr
    assert bridge.terminate() == 0, bridge.logs()[-3000:]

    # New input while the bridge is stopped: the lag is the source's new records.
    kafka.seed(src, values[:7], keys[:7], partition=0)
    result, rows = _lag(s["group_id"], env=two)
    assert result.code == 0, result.stderr
    assert rows[0] == [ends[0], ends[0] + 7, 7] and rows[1] == [ends[1], ends[1], 0]
    assert result.stdout.splitlines()[-1] == "total lag: 7"
    flag = _lag(s["group_id"], "--target", target_kafka.bootstrap,
                env={"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap})  # fmt: skip
    assert flag[1] == rows

    # The source group alone knows nothing: the positions are not committed there.
    alone = eos_bridge("lag", s["group_id"], env={"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap})
    assert alone.code == 2
    assert "has no committed offsets on" in alone.one_line_error()
