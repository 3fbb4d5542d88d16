"""Bad input and bad configuration: the DLQ accounts for everything, bad config says what."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from app.sink.output import H_CLASS, H_OFFSET, H_PARTITION, H_STEP, H_TOPIC
from tests.integration.conftest import MakeBridge
from tests.support.bridge import REPO, BridgeProcess, base_settings, bridge_topics, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

SPEC = """
steps:
  - set: {cents: "int(amount * 100)"}
  - drop: [pad_me]
"""


def test_bad_records_go_to_the_dlq_inside_the_transaction(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 2)
    values: list[bytes] = []
    expected_dlq: dict[int, str] = {}  # index -> error class
    for i in range(3000):
        if i % 300 == 7:
            values.append(b"{not json")
            expected_dlq[i] = "DeserializationError"
        elif i % 300 == 11:
            values.append(orjson.dumps({"id": f"r{i}", "amount": "abc"}))  # int("abcabc...")
            expected_dlq[i] = "ValueError"
        elif i % 300 == 13:
            values.append(orjson.dumps({"id": f"r{i}", "amount": 1, "pad": "x" * 5000}))
            expected_dlq[i] = "OutputTooLarge"
        else:
            values.append(orjson.dumps({"id": f"r{i}", "amount": i}))
    kafka.seed(src, values, partition=0)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    settings = base_settings(
        kafka, src, out, dlq, pipeline_spec=str(spec), max_output_bytes=2000, record_retries=1
    )
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0

    outputs = kafka.read_all(out)
    dead = kafka.read_all(dlq)
    assert len(outputs) + len(dead) == 3000  # inputs = outputs + dead-lettered
    assert len(dead) == len(expected_dlq) == 30
    got = {}
    for r in dead:
        assert r.header(H_TOPIC) == src.encode()
        assert r.header(H_PARTITION) == b"0"
        offset = int(r.header(H_OFFSET) or b"-1")
        assert r.value == values[offset]  # the original bytes, untouched
        got[offset] = (r.header(H_CLASS) or b"").decode()
        assert r.header(H_STEP)
    assert got == expected_dlq
    assert all(
        orjson.loads(r.value)["cents"] == orjson.loads(r.value)["amount"] * 100 for r in outputs
    )
    assert kafka.end_offsets(dlq, True) == kafka.end_offsets(dlq, False)


def _run_expecting_failure(env_settings: dict[str, object], timeout: float) -> tuple[int, str]:
    """Exit code and output of a bridge that must refuse to start; a hang fails the test
    through ``timeout`` (subprocess.TimeoutExpired)."""
    env = BridgeProcess(Path("/tmp"), **env_settings).env()
    proc = subprocess.run(
        [sys.executable, "-m", "app", "run"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_missing_input_topic_refuses_to_start(kafka: KafkaFixture) -> None:
    out = kafka.create_topic(kafka.unique("out"))
    dlq = kafka.create_topic(kafka.unique("dlq"))
    code, text = _run_expecting_failure(
        {
            "bootstrap_servers": kafka.bootstrap,
            "input_topics": ["no-such-topic"],
            "output_topic": out,
            "dlq_topic": dlq,
        },
        60,
    )
    assert code == 2, text
    assert "input_topics: topic 'no-such-topic' does not exist" in text


def test_commit_interval_over_transaction_timeout_refuses_to_start() -> None:
    code, text = _run_expecting_failure(
        {
            "input_topics": ["a"],
            "output_topic": "b",
            "commit_interval": 60,
            "transaction_timeout_ms": 60000,
        },
        30,
    )
    assert code == 2, text
    assert "commit_interval (60.0s) must stay well below transaction_timeout_ms" in text
    assert "Traceback" not in text


def test_unreachable_bootstrap_fails_within_the_startup_timeout() -> None:
    code, text = _run_expecting_failure(
        {
            "bootstrap_servers": "127.0.0.1:1",
            "input_topics": ["a"],
            "output_topic": "b",
            "startup_timeout": 5,
        },
        60,
    )
    assert code == 2, text
    assert "cannot reach Kafka at bootstrap_servers='127.0.0.1:1'" in text
