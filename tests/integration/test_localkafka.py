"""The local Kafka launcher against itself: transactions, 3-broker faults, clean-up, bad env."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from devkit.kafka import LocalKafka
from tests.support.bridge import REPO
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


def test_read_committed_sees_only_committed_batch(kafka: KafkaFixture) -> None:
    topic = kafka.create_topic(partitions=2)
    producer = kafka.transactional_producer()
    producer.begin_transaction()
    for i in range(50):
        producer.produce(topic, value=f"committed-{i}".encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=f"aborted-{i}".encode())
    producer.flush(30)
    producer.abort_transaction(30)

    committed = sorted(r.value for r in kafka.read_all(topic) if r.value)
    everything = sorted(r.value for r in kafka.read_all(topic, read_committed=False) if r.value)

    assert committed == sorted(f"committed-{i}".encode() for i in range(50))
    assert len(everything) == 80
    assert {v for v in everything if v.startswith(b"aborted-")} == {
        f"aborted-{i}".encode() for i in range(30)
    }


def _produce_batch(producer, topic: str, values: list[bytes]) -> bool:  # type: ignore[no-untyped-def]
    """One transaction; True when committed, False when it had to be aborted."""
    try:
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v)
        producer.commit_transaction(60)
        return True
    except KafkaException as exc:
        err = exc.args[0]
        if err.txn_requires_abort():
            producer.abort_transaction(60)
            return False
        if err.retriable():
            producer.commit_transaction(60)  # commit resumes where it stopped
            return True
        raise


@pytest.mark.cluster3
def test_three_brokers_sigkill_one_loses_nothing_committed(cluster3: LocalKafka) -> None:
    kafka = KafkaFixture(cluster3.bootstrap, replication=3)
    topic = kafka.create_topic(partitions=3, config={"min.insync.replicas": "2"})
    producer = kafka.transactional_producer(**{"acks": "all", "transaction.timeout.ms": 60000})
    committed: list[bytes] = []

    def batch(n: int) -> None:
        values = [f"b{n}-{i}".encode() for i in range(200)]
        for _attempt in range(5):
            if _produce_batch(producer, topic, values):
                committed.extend(values)
                return
        raise AssertionError(f"batch {n} could not be committed in 5 attempts")

    batch(0)
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap})
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    cluster3.kill(leader)
    assert not cluster3.broker(leader).alive()
    for n in range(1, 6):
        batch(n)
    cluster3.restart(leader)
    for n in range(6, 9):
        batch(n)

    def back_in_isr() -> bool:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
        return all(leader in p.isrs for p in parts)

    wait_until(back_in_isr, 60, f"broker {leader} back in the ISR of every partition")
    values = [r.value for r in kafka.read_all(topic)]
    assert sorted(values) == sorted(committed)  # nothing lost, nothing doubled
    assert len(committed) == 9 * 200


def test_brokers_die_with_a_crashed_owner(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from devkit.kafka import LocalKafka
        cluster = LocalKafka(Path({str(tmp_path / "k")!r}), brokers=1).start()
        print(cluster.brokers[0].pid, flush=True)
        os._exit(3)  # a crash: no finalizers, no stop()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 3, proc.stderr
    pid = int(proc.stdout.split()[0])
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), 30, f"broker pid {pid} to exit")


def _dev_kafka(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "devkit.kafka", "start", "--dir", str(tmp_path / "dk")]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, cwd=REPO)


def test_no_java_says_what_to_install(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # neither java nor mvn
    proc = _dev_kafka(env, tmp_path)
    assert proc.returncode == 2
    assert "`java` was not found (needed by the local Kafka broker)" in proc.stderr
    assert "apt-get install -y openjdk-17-jre-headless" in proc.stderr


def test_no_maven_says_what_to_install(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = subprocess.run(["which", "java"], capture_output=True, text=True).stdout.strip()
    (bin_dir / "java").symlink_to(java)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=str(bin_dir), EOS_BRIDGE_HOME=str(tmp_path / "empty-cache"))
    proc = _dev_kafka(env, tmp_path)
    assert proc.returncode == 2
    assert "`mvn` was not found (needed by the local Kafka broker)" in proc.stderr
    assert "apt-get install -y maven" in proc.stderr


def test_cached_jars_need_no_maven(kafka_cluster: LocalKafka | None, tmp_path: Path) -> None:
    """Second run does not download: with the cache filled, no mvn on PATH is needed."""
    java = subprocess.run(["which", "java"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, PATH=str(Path(java).parent))
    code = "from devkit.kafka import ensure_kafka_jars; print(ensure_kafka_jars())"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    assert any(Path(proc.stdout.strip()).glob("kafka_2.13-*.jar"))


def test_commit_fails_for_a_failed_record_that_had_no_callback(kafka: KafkaFixture) -> None:
    """The contract the exactly-once stateful bridge relies on (app/runner.py: no per-record
    delivery callback): librdkafka refuses to commit a transaction in which any record failed
    delivery, and its error names the topic, partition and broker error."""
    topic = kafka.create_topic(config={"message.timestamp.before.max.ms": "60000"})
    producer = kafka.transactional_producer()
    producer.begin_transaction()
    producer.produce(topic, b"fine", b"k")
    producer.produce(topic, b"too old", b"k", timestamp=1_000)  # broker: INVALID_TIMESTAMP
    assert producer.flush(30) == 0
    with pytest.raises(KafkaException) as failed:
        producer.commit_transaction(30)
    err = failed.value.args[0]
    assert err.txn_requires_abort()
    assert topic in err.str() and "Invalid timestamp" in err.str()
    producer.abort_transaction(30)
    assert kafka.read_all(topic) == []


def test_cluster_id_starting_with_a_dash_and_a_taken_port(tmp_path: Path) -> None:
    """Two one-in-N start-up failures made certain: a cluster id that begins with "-" (URL-safe
    base64 does that one time in 64) and a picked port that another process binds before the
    broker does (the start retries on new ports)."""
    cluster = LocalKafka(tmp_path / "kafka", brokers=1, heap="256m")
    taken = cluster.brokers[0].port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        cluster.start(cluster_id="-" + "A" * 21)
    try:
        assert cluster.brokers[0].port != taken
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert admin.describe_cluster(request_timeout=10).result(timeout=20).cluster_id == (
            "-" + "A" * 21
        )
    finally:
        cluster.stop()
