"""``eos-bridge verify`` between two clusters (docs/cross-cluster.md): the input read on the
source (the session broker, ``kafka``), the output and the dead letters on the target (a second
broker, ``target_kafka``), the committed input range from the bridge's offsets topic on the
target. Both modes (``--id-field``, ``--pipeline-spec``) say OK after an exactly-once run, then
exit 1 naming a duplicate the test produces transactionally into the target's output."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, json_records
from tests.support.cli import Result, eos_bridge
from tests.support.kafka import KafkaFixture, wait_until
from tests.support.xcluster import alive, xcaught_up

pytestmark = pytest.mark.integration

SPEC = 'steps:\n  - set: {cents: "amount * 100"}\n'


def _verify(mode: list[str], common: list[str], env: dict[str, str]) -> Result:
    return eos_bridge("verify", *common, *mode, env=env)


def test_verify_across_clusters_both_modes(
    kafka: KafkaFixture, target_kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src = kafka.create_topic(kafka.unique("ver-in"), 2)
    out = target_kafka.create_topic(target_kafka.unique("ver-out"), 2)
    dlq = target_kafka.create_topic(target_kafka.unique("ver-dlq"), 1)
    spec = tmp_path / "set.yaml"
    spec.write_text(SPEC)
    values, keys = json_records(1_000)
    kafka.seed(src, [*values, b"not json", b"{broken"], [*keys, b"k", b"k"])
    s = base_settings(
        kafka, src, out, dlq, pipeline_spec=str(spec),
        target={"bootstrap_servers": target_kafka.bootstrap},
    )  # fmt: skip
    bridge = bridges(**s).start()
    wait_until(lambda: alive([bridge]) or xcaught_up(kafka, target_kafka, s), 180, "caught up")
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    assert len(target_kafka.read_all(dlq)) == 2
    # Input the bridge never saw: outside the committed range read from the target.
    late_values, late_keys = json_records(5, start=1_000)
    kafka.seed(src, late_values, late_keys)

    env = {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap,
           "BRIDGE_TARGET__BOOTSTRAP_SERVERS": target_kafka.bootstrap}  # fmt: skip
    common = ["--input", src, "--output", out, "--dlq", dlq, "--group", s["group_id"]]
    modes = [["--id-field", "id"], ["--pipeline-spec", str(spec)]]
    for mode in modes:
        result = _verify(mode, common, env)
        assert result.code == 0, result.stdout + result.stderr
        assert result.stdout.startswith("1002 in, 1000 out, 0 duplicates, 0 missing, 2 dead-")
        assert f"offsets topic '{s['group_id']}.offsets' on {target_kafka.bootstrap}" in (
            result.stderr
        )
    flag = _verify(modes[0], [*common, "--target", target_kafka.bootstrap],
                   {"BRIDGE_BOOTSTRAP_SERVERS": kafka.bootstrap})  # fmt: skip
    assert flag.code == 0, flag.stdout + flag.stderr

    # A duplicate in the target's output, committed in a transaction of its own.
    first = next(r for r in target_kafka.read_all(out) if r.partition == 1)
    producer = target_kafka.transactional_producer()
    producer.begin_transaction()
    producer.produce(out, first.value, first.key, partition=first.partition)
    producer.commit_transaction(30)
    results = [_verify(mode, common, env) for mode in modes]
    for result in results:
        assert result.code == 1, result.stdout + result.stderr
        assert "1001 out, 1 duplicates, 0 missing" in result.stdout
    assert f"duplicated: {orjson.loads(first.value or b'')['id']}" in results[0].stdout
