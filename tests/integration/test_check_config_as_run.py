"""``check-config --check-topics`` makes every start-up check ``run`` makes and refuses with
``run``'s first error line (issue 56, acceptance 2): against the session's real broker, a
second real cluster for the two-cluster case, and the session's real Schema Registry."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from devkit.kafka.cluster import free_port
from tests.support.cli import Result, eos_bridge
from tests.support.kafka import KafkaFixture
from tests.support.registry import RegistryFixture

pytestmark = pytest.mark.integration

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "demo",
    "fields": [{"name": "id", "type": "string"}],
}
RESTARTED = "; exiting so Kubernetes restarts the instance"  # run's exit 3 only


def _run_error(result: Result) -> str:
    """The first ERROR line ``run`` logs (JSON log format), its message."""
    assert "Traceback" not in result.stderr, result.stderr
    for line in result.stderr.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry["level"] == "ERROR":
                return str(entry["message"])
    raise AssertionError(f"run logged no error:\n{result.stderr}")


def _check_error(result: Result) -> str:
    """The first line ``check-config`` prints that is not a warning, without its prefix."""
    assert "Traceback" not in result.stderr, result.stderr
    said = [
        line
        for line in result.stderr.splitlines()
        if line.strip() and not line.startswith("eos-bridge: warning:")
    ]
    assert said, result.stderr
    prefix = "eos-bridge check-config: "
    assert said[0].startswith(prefix), result.stderr
    return said[0].removeprefix(prefix)


def _compare(env: dict[str, str], said: str, run_code: int = 2) -> str:
    """``run`` and ``check-config --check-topics`` with ``env``: the same first error line
    (``run``'s with its restart note for exit 3), which contains ``said``; check-config exits 2."""
    env = {"BRIDGE_HTTP_PORT": "0", "BRIDGE_LOG_FORMAT": "json", **env}
    run = eos_bridge("run", env=env, timeout=90)
    check = eos_bridge("check-config", "--check-topics", env=env, timeout=90)
    assert run.code == run_code, run.stderr
    assert check.code == 2, check.stderr
    line = _check_error(check)
    expected = line + (RESTARTED if run_code == 3 else "")
    assert _run_error(run) == expected
    assert said in line, line
    print(f"run (exit {run.code}) and check-config (exit 2): {line}")
    return line


def _topics(kafka: KafkaFixture, dlq: bool = True) -> dict[str, str]:
    src, out = kafka.create_topic(), kafka.create_topic()
    if dlq:
        kafka.create_topic(f"{out}.dlq")
    return {
        "BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "BRIDGE_INPUT_TOPICS": src,
        "BRIDGE_OUTPUT_TOPIC": out,
        "BRIDGE_GROUP_ID": kafka.unique("g"),
    }


def _avro_out(registry_url: str, schema: dict[str, object]) -> dict[str, str]:
    return {
        "BRIDGE_OUTPUT_FORMAT": "avro",
        "BRIDGE_SCHEMA_REGISTRY": orjson.dumps({"url": registry_url}).decode(),
        "BRIDGE_OUTPUT_SCHEMA": orjson.dumps(schema).decode(),
    }


def _order_file(tmp_path: Path) -> str:
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(ORDER))
    return str(path)


def test_a_wrong_registry_path(
    kafka: KafkaFixture, registry: RegistryFixture, tmp_path: Path
) -> None:
    wrong = registry.url.rstrip("/") + "/no/such/api"
    env = {**_topics(kafka), **_avro_out(wrong, {"schema_file": _order_file(tmp_path)})}
    _compare(env, wrong.split("//", 1)[1].split("/", 1)[0])


def test_an_unreachable_registry(kafka: KafkaFixture, tmp_path: Path) -> None:
    away = f"http://127.0.0.1:{free_port()}"
    env = {
        **_topics(kafka),
        **_avro_out(away, {"schema_file": _order_file(tmp_path)}),
        "BRIDGE_STARTUP_TIMEOUT": "2",
    }
    assert "unreachable" in _compare(env, away, run_code=3)


def test_a_missing_schema_file(kafka: KafkaFixture, registry: RegistryFixture) -> None:
    env = {**_topics(kafka), **_avro_out(registry.url, {"schema_file": "/nonexistent.avsc"})}
    _compare(env, "/nonexistent.avsc")


def test_an_unknown_subject(kafka: KafkaFixture, registry: RegistryFixture) -> None:
    env = _topics(kafka)
    env.update(_avro_out(registry.url, {"use_latest_version": True}))
    _compare(env, f"{env['BRIDGE_OUTPUT_TOPIC']}-value")


def test_a_dlq_missing_on_the_source_of_one_cluster(kafka: KafkaFixture) -> None:
    env = _topics(kafka, dlq=False)
    _compare(env, f"dlq_topic: topic '{env['BRIDGE_OUTPUT_TOPIC']}.dlq' does not exist")


def test_a_dlq_missing_on_the_target(kafka: KafkaFixture, target_kafka: KafkaFixture) -> None:
    """The inputs on the source; the output on the target, its DLQ on the source only (where
    the bridge does not write it): both refuse, naming the target."""
    src, out = kafka.create_topic(), target_kafka.create_topic(kafka.unique("out"))
    kafka.create_topic(f"{out}.dlq")
    env = {
        "BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap,
        "BRIDGE_TARGET__BOOTSTRAP_SERVERS": target_kafka.bootstrap,
        "BRIDGE_INPUT_TOPICS": src,
        "BRIDGE_OUTPUT_TOPIC": out,
        "BRIDGE_GROUP_ID": kafka.unique("g"),
    }
    line = _compare(env, f"dlq_topic: topic '{out}.dlq' does not exist")
    assert target_kafka.bootstrap in line, line
