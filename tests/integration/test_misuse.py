"""Misuse that used to stall, loop or crash the bridge (issue 52, points 3-5): routes that
cannot work are dead letters, whatever a Python step raises is a dead letter, and every
setting mistake is one line and exit 2 (a registry that stays away at start: exit 3), also
through ``check-config``; SIGTERM while starting exits 0 at once.

The bridge runs as a subprocess, against the session broker where one is needed."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from app.sink.output import H_CLASS, H_OFFSET, H_STEP
from devkit.kafka.cluster import free_port
from tests.integration.conftest import MakeBridge
from tests.support.bridge import REPO, BridgeProcess, base_settings, bridge_topics, wait_caught_up
from tests.support.cli import eos_bridge
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration

NOT_A_BROKER = {"BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPIC": "out", "BRIDGE_HTTP_PORT": "0"}


def _one_error(stderr: str) -> str:
    """The one line that says what is wrong: a logged ERROR line, or the line under
    ``eos-bridge run: invalid configuration:`` (settings are read before logging starts)."""
    assert "Traceback" not in stderr, stderr
    said = [
        line for line in stderr.splitlines()
        if line.strip() and " INFO " not in line and " WARNING " not in line
        and not line.endswith("invalid configuration:")
    ]  # fmt: skip
    assert len(said) == 1, stderr
    return said[0]


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"BRIDGE_PRODUCER": '{"linger.ms": "abc"}'}, "producer.linger.ms (BRIDGE_PRODUCER)"),
        ({"BRIDGE_CONSUMER": '{"fetch.max.bytes": 1}'}, "consumer.fetch.max.bytes (BRIDGE_"),
        ({"BRIDGE_STARTUP_TIMEOUT": "4000"}, "startup_timeout (BRIDGE_STARTUP_TIMEOUT)"),
        ({"BRIDGE_STATE_DIR": "/etc/hostname/state"}, "state_dir (BRIDGE_STATE_DIR)"),
        ({"BRIDGE_DLQ_TOPIC": "in"}, "dlq_topic (BRIDGE_DLQ_TOPIC) 'in' is also an input topic"),
        ({"BRIDGE_CONFIG_FILE": "TAB"}, "tab.yaml:2:1: not valid YAML"),
        ({"BRIDGE_PIPELINE": "exits_at_import:p"}, "importing it raised SystemExit"),
    ],
)
def test_a_setting_mistake_is_one_line_and_exit_2(
    env: dict[str, str], said: str, tmp_path: Path
) -> None:
    (tmp_path / "tab.yaml").write_text("group_id: g\n\tinstance_id: i\n")
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    env = {k: str(tmp_path / "tab.yaml") if v == "TAB" else v for k, v in env.items()}
    run_env = {**NOT_A_BROKER, **env, "PYTHONPATH": f"{REPO}:{tmp_path}"}
    result = eos_bridge("run", env=run_env, timeout=60)
    assert result.code == 2, result.stderr
    assert said in _one_error(result.stderr)
    check = eos_bridge("check-config", env=run_env, timeout=60)
    assert check.code == 2, check.stderr
    assert said in check.stderr and "Traceback" not in check.stderr


def test_sigterm_while_the_broker_is_unreachable_exits_0_at_once(tmp_path: Path) -> None:
    bridge = BridgeProcess(
        tmp_path, bootstrap_servers=f"127.0.0.1:{free_port()}", input_topics=["in"],
        output_topic="out", startup_timeout=60,
    ).start()  # fmt: skip
    try:
        wait_until(lambda: "waiting up to" in bridge.logs(), 30, "the start-up line")
        started = time.monotonic()
        # a deadline far below startup_timeout (60 s): it fails on a bridge that waits it out
        assert bridge.terminate(timeout=10) == 0, bridge.logs()
        print(f"SIGTERM while starting: exit 0 after {time.monotonic() - started:.2f}s")
    finally:
        bridge.stop()
    assert "Traceback" not in bridge.logs()
    assert "stopped cleanly while starting" in bridge.logs()


def _pipeline_module(tmp_path: Path) -> str:
    (tmp_path / "misuse_steps.py").write_text(
        "import sys\n"
        "from app.pipeline import Pipeline\n"
        "class Unprintable(Exception):\n"
        "    def __str__(self):\n"
        "        raise RuntimeError('no text')\n"
        "def step(v):\n"
        "    if v.get('do') == 'exit':\n"
        "        sys.exit(1)\n"
        "    if v.get('do') == 'unprintable':\n"
        "        raise Unprintable()\n"
        "    return v\n"
        "pipeline = Pipeline().map(step).route(lambda v: v.get('to'))\n"
    )
    return "misuse_steps:pipeline"


def test_bad_routes_and_raising_steps_are_dead_letters(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    side = kafka.create_topic(kafka.unique("side"))
    bad = {
        "__consumer_offsets": ("InvalidRoute", "route"),
        "__transaction_state": ("InvalidRoute", "route"),
        src: ("InvalidRoute", "route"),
        dlq: ("InvalidRoute", "route"),
    }
    values, expected = [], {}
    for i in range(400):
        value: dict[str, object] = {"n": i}
        if i % 40 == 3:
            value["to"] = list(bad)[(i // 40) % len(bad)]
            expected[i] = bad[str(value["to"])]
        elif i % 40 == 5:
            value["do"] = "exit"
            expected[i] = ("SystemExit", "map")
        elif i % 40 == 7:
            value["do"] = "unprintable"
            expected[i] = ("Unprintable", "map")
        elif i % 40 == 9:
            value["to"] = side
        values.append(orjson.dumps(value))
    kafka.seed(src, values, partition=0)
    settings = base_settings(kafka, src, out, dlq, pipeline=_pipeline_module(tmp_path))
    bridge = bridges(**settings)
    bridge.pythonpath = f"{REPO}:{tmp_path}"
    bridge.start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0
    assert "Traceback" not in bridge.logs()
    got = {
        int(r.header(H_OFFSET) or b"-1"): (
            (r.header(H_CLASS) or b"").decode(), (r.header(H_STEP) or b"").decode()
        )
        for r in kafka.read_all(dlq)
    }  # fmt: skip
    assert got == expected
    assert len(kafka.read_all(out)) + len(kafka.read_all(side)) + len(got) == len(values)
    assert len(kafka.read_all(src)) == len(values)  # nothing routed back into the input


def test_a_compacted_dlq_is_refused_at_start_and_by_check_config(kafka: KafkaFixture) -> None:
    src, out, _ = bridge_topics(kafka, 1)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1, {"cleanup.policy": "compact,delete"})
    env = {
        "BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap, "BRIDGE_INPUT_TOPICS": src,
        "BRIDGE_OUTPUT_TOPIC": out, "BRIDGE_DLQ_TOPIC": dlq, "BRIDGE_HTTP_PORT": "0",
        "BRIDGE_GROUP_ID": kafka.unique("g"),
    }  # fmt: skip
    result = eos_bridge("run", env=env, timeout=60)
    assert result.code == 2, result.stderr
    assert f"dlq_topic (BRIDGE_DLQ_TOPIC): topic {dlq!r} has cleanup.policy" in _one_error(
        result.stderr
    )
    check = eos_bridge("check-config", "--check-topics", env=env, timeout=60)
    assert check.code == 2, check.stderr
    assert "cleanup.policy=compact,delete" in check.one_line_error()


def test_a_registry_away_at_start_is_waited_for_then_exit_3(kafka: KafkaFixture) -> None:
    src, out, dlq = bridge_topics(kafka, 1)
    env = {
        "BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap, "BRIDGE_INPUT_TOPICS": src,
        "BRIDGE_OUTPUT_TOPIC": out, "BRIDGE_DLQ_TOPIC": dlq, "BRIDGE_HTTP_PORT": "0",
        "BRIDGE_GROUP_ID": kafka.unique("g"), "BRIDGE_STARTUP_TIMEOUT": "3",
        "BRIDGE_INPUT_FORMAT": "avro",
        "BRIDGE_SCHEMA_REGISTRY": orjson.dumps({"url": f"http://127.0.0.1:{free_port()}"}).decode(),
    }  # fmt: skip
    result = eos_bridge("run", env=env, timeout=60)
    assert result.code == 3, result.stderr
    line = _one_error(result.stderr)
    assert "unreachable" in line and "startup_timeout" in line
    assert "waiting up to startup_timeout" in result.stderr
