"""The first-hour tools against a real broker, run as a user runs them (subprocesses)."""

from __future__ import annotations

import json

import orjson
import pytest
from confluent_kafka import TopicPartition

from tests.support.cli import eos_bridge
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration


def env(kafka: KafkaFixture) -> dict[str, str]:
    return {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap}


def test_topics_create_describe_list(kafka: KafkaFixture) -> None:
    name = kafka.unique("created")
    args = ["--partitions", "3", "--config", "cleanup.policy=compact"]
    created = eos_bridge("topics", "create", name, *args, env=env(kafka))
    assert created.code == 0, created.stderr
    described = eos_bridge("topics", "describe", name, env=env(kafka)).stdout
    assert f"topic {name}: 3 partition(s)" in described
    assert "cleanup.policy=compact" in described
    assert name in eos_bridge("topics", "list", env=env(kafka)).stdout.split()

    again = eos_bridge("topics", "create", name, env=env(kafka))
    assert again.code == 2
    assert f"topic {name!r} exists already" in again.one_line_error()
    assert eos_bridge("topics", "create", name, "--if-not-exists", env=env(kafka)).code == 0


def test_produce_with_keys_then_tail_prints_them(kafka: KafkaFixture) -> None:
    topic = kafka.create_topic(partitions=2)
    lines = "".join(json.dumps({"id": i, "user": f"u{i % 3}"}) + "\n" for i in range(9))
    produced = eos_bridge("produce", topic, "--key-field", "user", stdin=lines, env=env(kafka))
    assert produced.code == 0, produced.stderr
    assert {(r.key, orjson.loads(r.value)["user"].encode()) for r in kafka.read_all(topic)} == {
        (f"u{i}".encode(), f"u{i}".encode()) for i in range(3)
    }

    tail = eos_bridge(
        "tail", topic, "--from-beginning", "--exit-at-end", "--format", "json", env=env(kafka)
    )
    assert tail.code == 0, tail.stderr
    records = [json.loads(line) for line in tail.stdout.splitlines()]
    assert sorted(r["value"]["id"] for r in records) == list(range(9))
    assert all(r["key"] == r["value"]["user"] for r in records)


def test_tail_hides_aborted_records_unless_uncommitted(kafka: KafkaFixture) -> None:
    topic = kafka.create_topic()
    producer = kafka.transactional_producer()
    for batch, commit in (("kept", True), ("aborted", False), ("kept-too", True)):
        producer.begin_transaction()
        producer.produce(topic, value=json.dumps({"batch": batch}).encode())
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    base = ["tail", topic, "--from-beginning", "--exit-at-end"]

    committed = eos_bridge(*base, env=env(kafka))
    uncommitted = eos_bridge(*base, "--uncommitted", env=env(kafka))

    assert committed.code == uncommitted.code == 0
    assert [json.loads(v)["batch"] for v in committed.stdout.splitlines()] == ["kept", "kept-too"]
    batches = [json.loads(v)["batch"] for v in uncommitted.stdout.splitlines()]
    assert batches == ["kept", "aborted", "kept-too"]


def test_tail_stops_after_max_records(kafka: KafkaFixture) -> None:
    topic = kafka.create_topic()
    kafka.seed(topic, [json.dumps({"n": n}).encode() for n in range(5)])
    tail = eos_bridge("tail", topic, "--from-beginning", "--max", "2", env=env(kafka))
    assert tail.code == 0
    assert tail.stdout.splitlines() == ['{"n": 0}', '{"n": 1}']


def test_lag_reports_committed_against_end(kafka: KafkaFixture) -> None:
    topic = kafka.create_topic(partitions=2)
    kafka.seed(topic, [b"{}"] * 4, partition=0)
    kafka.seed(topic, [b"{}"] * 3, partition=1)
    group = kafka.unique("group")

    consumer = kafka.consumer(group)
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 3)], asynchronous=False
    )
    consumer.close()

    lag = eos_bridge("lag", group, env=env(kafka))

    assert lag.code == 0, lag.stderr
    rows = [line.split() for line in lag.stdout.splitlines()[1:-1]]
    assert rows == [[topic, "0", "1", "4", "3"], [topic, "1", "3", "3", "0"]]
    assert lag.stdout.splitlines()[-1] == "total lag: 3"

    unknown = eos_bridge("lag", kafka.unique("nobody"), env=env(kafka))
    assert unknown.code == 2
    assert "has no committed offsets" in unknown.one_line_error()


def test_verify_and_tail_name_a_misspelled_topic(kafka: KafkaFixture) -> None:
    topic = kafka.create_topic(kafka.unique("payments"))
    misspelled = topic.replace("payments", "paymets")
    verify = eos_bridge(
        "verify", "--input", misspelled, "--output", topic, "--id-field", "id", env=env(kafka)
    )
    assert verify.code == 2
    line = verify.one_line_error()
    assert f"--input: topic {misspelled!r} does not exist" in line
    assert f"did you mean {topic!r}" in line

    tail = eos_bridge("tail", misspelled, env=env(kafka))
    assert tail.code == 2
    assert f"topic {misspelled!r} does not exist" in tail.one_line_error()


def test_check_config_checks_the_topics_exist(kafka: KafkaFixture) -> None:
    src = kafka.create_topic()
    out = kafka.create_topic()
    settings = {**env(kafka), "BRIDGE_INPUT_TOPICS": src, "BRIDGE_OUTPUT_TOPIC": out}

    missing_dlq = eos_bridge("check-config", "--check-topics", env=settings)
    assert missing_dlq.code == 2
    assert f"dlq_topic: topic '{out}.dlq' does not exist" in missing_dlq.one_line_error()

    kafka.create_topic(f"{out}.dlq")
    ok = eos_bridge("check-config", "--check-topics", env=settings)
    assert ok.code == 0, ok.stderr
    assert "topics exist" in ok.stderr


def _dead_letter(source_offset: int, error_class: str, step: str) -> list[tuple[str, bytes]]:
    return [
        ("trace", b"t-1"),
        ("eos.dlq.source.topic", b"payments"),
        ("eos.dlq.source.partition", b"0"),
        ("eos.dlq.source.offset", str(source_offset).encode()),
        ("eos.dlq.error.class", error_class.encode()),
        ("eos.dlq.error.message", b"what went wrong"),
        ("eos.dlq.error.step", step.encode()),
    ]


def test_dlq_summary_and_show_read_the_committed_dead_letters(kafka: KafkaFixture) -> None:
    dlq = kafka.create_topic(kafka.unique("dlq"))
    kafka.seed(
        dlq,
        [b'{"amout": 1}', b'{"amout": 2}', b"not json", b'{"amout": 3}'],
        [b"k0", b"k1", None, b"k3"],
        headers=[
            _dead_letter(3, "KeyError", "set"),
            _dead_letter(7, "KeyError", "set"),
            _dead_letter(9, "DeserializationError", "deserialize"),
            _dead_letter(12, "KeyError", "set"),
        ],
    )
    aborted = kafka.transactional_producer()  # a dead letter of an aborted transaction
    aborted.begin_transaction()
    aborted.produce(dlq, b"{}", headers=_dead_letter(99, "KeyError", "set"))
    aborted.abort_transaction()
    summary = eos_bridge("dlq", "summary", dlq, env=env(kafka))
    assert summary.code == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert lines[0] == f"4 dead letters in {dlq!r}"
    assert lines[1].split() == [
        "3",
        "KeyError",
        "step",
        "'set'",
        "from",
        "payments",
        "[0]",
        "3..12",
    ]
    assert lines[2].split()[:2] == ["1", "DeserializationError"]
    shown = eos_bridge(
        "dlq", "show", dlq, "--error-class", "KeyError", "--max", "2", env=env(kafka)
    )
    records = [orjson.loads(line) for line in shown.stdout.splitlines()]
    assert [r["error"]["source.offset"] for r in records] == ["3", "7"]
    assert records[0]["value"] == {"amout": 1} and records[0]["key"] == "k0"
    assert records[0]["headers"] == {"trace": "t-1"}
    missing = eos_bridge("dlq", "summary", kafka.unique("nope"), env=env(kafka))
    assert missing.code == 2 and "does not exist" in missing.one_line_error()
