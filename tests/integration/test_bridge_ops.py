"""Operations surface on a running bridge: metrics, health endpoints, JSON logs, check-config,
and the at-least-once mode."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge
from tests.support.bridge import (
    REPO,
    BridgeProcess,
    base_settings,
    bridge_topics,
    http_get,
    json_records,
    metric,
    metrics_when,
    wait_caught_up,
)
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration

# Hang guards, never speed requirements: generous for a bridge starting and joining its group
# on a loaded 2-core machine.
GUARD_S = 120


def test_metrics_health_and_json_logs(kafka: KafkaFixture, bridges: MakeBridge) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    values, keys = json_records(5000)
    kafka.seed(src, [*values, b"not json"], [*keys, b"k"])
    port = free_port()
    settings = base_settings(kafka, src, out, dlq, http_port=port, log_format="json")
    group = settings["group_id"]
    bridge = bridges(**settings).start()
    wait_until(lambda: http_get(port, "/livez")[0] == 200, GUARD_S, "/livez")
    wait_caught_up(kafka, group, src, GUARD_S, [bridge])
    wait_until(lambda: http_get(port, "/readyz")[0] == 200, GUARD_S, "/readyz")
    text = metrics_when(
        port,
        lambda t: (
            metric(t, "eos_bridge_checkpoints_total") >= 1
            and "eos_bridge_consumer_lag_records{" in t
            and metric(t, "eos_bridge_consumer_lag_records") == 0
        ),
        "the last checkpoint counted and the lag at 0",
    )
    assert metric(text, "eos_bridge_input_records_total") == 5001
    assert metric(text, "eos_bridge_output_records_total") == 5000
    assert metric(text, "eos_bridge_produced_dead_letter_records_total") == 1
    assert metric(text, "eos_bridge_checkpoint_duration_seconds_count") >= 1
    assert metric(text, "eos_bridge_rebalances_total") >= 1
    assert http_get(port, "/nope")[0] == 404
    assert bridge.terminate() == 0
    lines = [ln for ln in bridge.logs().splitlines() if ln.startswith("{")]
    assert lines, "no JSON log lines"
    parsed = [json.loads(ln) for ln in lines]
    assert {"ts", "level", "logger", "message"} <= set(parsed[0])
    assert any(p["message"].startswith("dead-lettered 1 of ") for p in parsed)


def test_sigterm_during_start_up_stops_cleanly(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout may stop a pod that is still starting: SIGTERM while the bridge is being built
    (held at a gate inside it) ends in exit 0 and consumes nothing, not in death by signal."""
    src, out, dlq = bridge_topics(kafka, 2)
    kafka.seed(src, *json_records(100))
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("EOS_TEST_START_GATE", str(gate))
    settings = base_settings(kafka, src, out, dlq, pipeline="tests.startup_gate:pipeline")
    bridge = bridges(**settings).start()
    wait_until(lambda: (gate / "reached").exists() or not bridge.running(), GUARD_S, "the gate")
    assert bridge.running(), bridge.logs()
    assert bridge.proc is not None
    bridge.proc.send_signal(signal.SIGTERM)
    (gate / "open").write_text("go")
    assert bridge.wait(120) == 0, bridge.logs()[-3000:]
    assert "received SIGTERM" in bridge.logs() and "stopped cleanly" in bridge.logs()
    assert set(kafka.end_offsets(out).values()) == {0}
    assert all(o < 0 for o in kafka.committed_offsets(settings["group_id"], src).values())


def test_check_config_masks_secrets() -> None:
    env = BridgeProcess(
        Path("/tmp"),
        input_topics=["a"],
        output_topic="b",
        sasl_username="svc",
        sasl_password="s3cr3t-value",
    ).env()
    proc = subprocess.run(
        [sys.executable, "-m", "app", "check-config"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["sasl_password"] == "**********"
    assert "s3cr3t-value" not in proc.stdout
    assert shown["transactional_id"].startswith("eos-bridge-")


def test_at_least_once_mode_delivers_everything(kafka: KafkaFixture, bridges: MakeBridge) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    values, keys = json_records(10_000)
    kafka.seed(src, values, keys)
    settings = base_settings(kafka, src, out, dlq, processing_guarantee="at-least-once")
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, GUARD_S, [bridge])
    assert bridge.terminate() == 0
    ids = {orjson.loads(r.value)["id"] for r in kafka.read_all(out)}
    assert ids == {f"r{i}" for i in range(10_000)}
