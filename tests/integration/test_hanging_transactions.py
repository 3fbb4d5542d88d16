"""A hanging transaction on an output partition is seen (issue 55, scope 3): a producer of the
test's own begins a transaction on partition 0 of the bridge's output, produces and never
commits; ``eos_bridge_output_unstable_offsets`` shows the gap within 30 s while the bridge
goes on processing every partition, ``eos-bridge transactions`` shows the same gap, and once
the runbook's step ends the transaction (docs/operations.md, "Hanging transactions": a producer
with the hanging transactional.id re-initialised), the gap is 0 again."""

from __future__ import annotations

import orjson
import pytest

from devkit.kafka.cluster import free_port
from tests.support.bridge import (
    base_settings,
    bridge_topics,
    json_records,
    metric,
    metrics_when,
    wait_caught_up,
)
from tests.support.cli import eos_bridge_here
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration
SEEN_WITHIN_S = 30  # the acceptance's bound for the gap to show


def _gap(out: str, partition: int, name: str = "eos_bridge_output_unstable_offsets"):  # type: ignore[no-untyped-def]
    return lambda text: metric(text, name, topic=out, partition=str(partition))


def test_a_foreign_open_transaction_shows_as_a_gap_until_it_is_ended(
    kafka: KafkaFixture,
    bridges,  # type: ignore[no-untyped-def]
) -> None:
    src, out, dlq = bridge_topics(kafka)
    port = free_port()
    s = base_settings(kafka, src, out, dlq, http_port=port)
    values, keys = json_records(4_000)
    kafka.seed(src, values[:2_000], keys[:2_000])
    bridge = bridges(**s).start()
    wait_caught_up(kafka, s["group_id"], src, 120, [bridge])

    txid = kafka.unique("foreign")
    foreign = kafka.transactional_producer(txid)
    foreign.begin_transaction()
    foreign.produce(out, b"never committed", partition=0)
    foreign.flush(30)
    metrics_when(port, lambda t: _gap(out, 0)(t) > 0, "the gap on partition 0", SEEN_WITHIN_S)

    kafka.seed(src, values[2_000:], keys[2_000:])  # the bridge goes on, every partition
    wait_caught_up(kafka, s["group_id"], src, 120, [bridge])
    held = metrics_when(
        port, lambda t: _gap(out, 0, "eos_bridge_output_unstable_seconds")(t) > 0, "its age"
    )
    assert _gap(out, 0)(held) > 0
    shown = eos_bridge_here("transactions", out, "--bootstrap", kafka.bootstrap)
    assert shown.code == 0, shown.stderr
    rows = {int(line.split()[1]): int(line.split()[4]) for line in shown.stdout.splitlines()[1:-1]}
    assert rows[0] > 0 and "partitions with an open transaction: " in shown.stdout

    kafka.transactional_producer(txid)  # the runbook: init_transactions aborts it
    metrics_when(port, lambda t: _gap(out, 0)(t) == 0, "the gap to end", SEEN_WITHIN_S)
    assert bridge.terminate() == 0, bridge.logs()[-3000:]
    ids = [orjson.loads(r.value)["id"] for r in kafka.read_all(out)]
    assert sorted(ids) == sorted(orjson.loads(v)["id"] for v in values)  # once each, no foreign
