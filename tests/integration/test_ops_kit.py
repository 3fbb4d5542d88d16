"""The ops kit against live bridges: every metric the chart's dashboard and alert rules query
is in a real ``/metrics``; the lag series follow partition ownership; librdkafka's own log
lines come out as the bridge's JSON lines."""

from __future__ import annotations

import json

import pytest

from devkit.kafka.cluster import free_port
from tests.deploy.helpers import CHART, NAMESPACE, RELEASE, REPO, run_helm, tool_path
from tests.integration.conftest import MakeBridge
from tests.support.bridge import (
    BridgeProcess,
    base_settings,
    bridge_topics,
    http_get,
    json_records,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.promql import (
    dashboard_exprs,
    exported_names,
    keda_queries,
    metric_names,
    rule_exprs,
)

pytestmark = pytest.mark.integration

LAG = "eos_bridge_consumer_lag_records"


def chart_metric_names() -> set[str]:
    """Every metric name the dashboard's panels, the rendered alert rules and the KEDA
    example of docs/operations.md query."""
    rendered = run_helm(
        tool_path("helm.sh"),
        ["template", RELEASE, str(CHART), "--namespace", NAMESPACE,
         "--values", str(CHART / "ci" / "observability-values.yaml")],
    )  # fmt: skip
    exprs = dashboard_exprs(CHART / "files" / "dashboard.json") + rule_exprs(rendered)
    exprs += keda_queries(REPO / "docs" / "operations.md")
    assert len(exprs) > 20, "the dashboard or the rules lost their queries"
    return {name for expr in exprs for name in metric_names(expr)}


def lag_partitions(port: int) -> list[str]:
    """The ``topic/partition`` of every lag series one instance exports."""
    status, text = http_get(port, "/metrics")
    if status != 200:
        return []
    return [
        line.split('partition="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith(LAG + "{")
    ]


def test_dashboard_and_alerts_query_only_exported_metrics(
    kafka: KafkaFixture, bridges: MakeBridge
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    values, keys = json_records(2000)
    kafka.seed(src, [*values, b"not json"], [*keys, b"k"])
    port = free_port()
    settings = base_settings(kafka, src, out, dlq, http_port=port, log_format="json")
    # librdkafka's transaction lines (a few per checkpoint) at DEBUG: some surely come
    settings.update(log_level="DEBUG", kafka={"debug": "eos"})
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 300, [bridge])
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, 120, "/readyz")
    status, text = http_get(port, "/metrics")
    assert status == 200

    used = chart_metric_names()
    unknown = sorted(used - exported_names(text))
    assert unknown == [], f"the chart queries metrics the bridge does not export: {unknown}"
    assert {LAG, "eos_bridge_ready", "process_start_time_seconds"} <= used
    build = [ln for ln in text.splitlines() if ln.startswith("eos_bridge_build_info{")]
    assert len(build) == 1 and build[0].endswith(" 1.0") and 'librdkafka="' in build[0]

    assert bridge.terminate() == 0
    parsed = [json.loads(ln) for ln in bridge.logs().splitlines() if ln.startswith("{")]
    from_librdkafka = [p for p in parsed if p["logger"] == "librdkafka"]
    assert from_librdkafka, "no librdkafka line among the JSON log lines"
    assert {"ts", "level", "message"} <= set(from_librdkafka[0])
    assert all("rdkafka#" in p["message"] for p in from_librdkafka)


def test_lag_series_follow_partition_ownership(kafka: KafkaFixture, bridges: MakeBridge) -> None:
    """After a second instance takes half the partitions, each partition has exactly one lag
    series over both instances: the first dropped the series of what it gave away."""
    src, out, dlq = bridge_topics(kafka, 4)
    settings = base_settings(kafka, src, out, dlq)
    group, ports = settings["group_id"], (free_port(), free_port())
    values, keys = json_records(2000)
    kafka.seed(src, values, keys)
    first = bridges(**settings, http_port=ports[0]).start()
    wait_caught_up(kafka, group, src, 300, [first])
    wait_until(lambda: len(lag_partitions(ports[0])) == 4, 120, "lag of all 4 partitions")

    second = bridges(**{**settings, "instance_id": "i1"}, http_port=ports[1]).start()
    wait_until(
        lambda: http_get(ports[1], "/readyz")[0] == 200 and "running, 2 partitions"
        in http_get(ports[1], "/readyz")[1], 300, "second instance owns 2 partitions",
    )  # fmt: skip
    # New input for every partition, so each owner has a position to measure lag from.
    values, keys = json_records(2000, start=2000)
    kafka.seed(src, values, keys)
    instances: tuple[BridgeProcess, ...] = (first, second)
    wait_caught_up(kafka, group, src, 300, instances)

    def each_partition_once() -> bool:
        reported = lag_partitions(ports[0]) + lag_partitions(ports[1])
        return sorted(reported) == ["0", "1", "2", "3"]

    wait_until(each_partition_once, 120, "one lag series per partition across both instances")
    assert len(lag_partitions(ports[0])) == 2
    for bridge in instances:
        assert bridge.terminate() == 0, bridge.logs()[-3000:]
