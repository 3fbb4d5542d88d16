"""``eos-bridge dlq replay`` after a pipeline fix: every dead letter ends in the output once,
also when a replay is SIGKILLed half-way inside an open transaction and run again."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from devkit.kafka.cluster import die_with_parent
from tests.support.bridge import REPO, base_settings, wait_caught_up
from tests.support.feed import open_records
from tests.support.kafka import KafkaFixture, wait_until

pytestmark = pytest.mark.integration


def _records() -> tuple[list[bytes], list[bytes]]:
    """200 payments, 21 of them with the producer's typo ``amout``; one of those also asks
    the replay's test step to hang (so the replay can be killed half-way)."""
    values = []
    for i in range(200):
        field = "amout" if i % 10 == 3 else "amount"
        values.append(orjson.dumps({"id": f"p{i}", field: i + 0.5}))
    values.insert(120, orjson.dumps({"id": "p-hang", "amout": 1.0, "hang": True}))
    return values, [f"u{i % 7}".encode() for i in range(len(values))]


def _replay(
    log: Path, settings: dict[str, object], dlq: str, pipeline: str
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    env |= {f"BRIDGE_{k.upper()}": str(v) for k, v in settings.items() if k != "input_topics"}
    env |= {"BRIDGE_INPUT_TOPICS": "unused", "PYTHONPATH": str(REPO), "BRIDGE_HTTP_PORT": "0"}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "app", "dlq", "replay", dlq, "--pipeline", pipeline],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=die_with_parent,
        )  # fmt: skip


def test_replay_after_a_fix_writes_every_dead_letter_once_even_when_killed(
    kafka: KafkaFixture,
    bridges,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    src = kafka.create_topic(kafka.unique("in"), 2)
    out = kafka.create_topic(kafka.unique("out"), 2)
    dlq = kafka.create_topic(kafka.unique("dlq"), 1)
    values, keys = _records()
    kafka.seed(src, values, keys)
    settings = base_settings(kafka, src, out, dlq, pipeline="tests.pipelines:cents")
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 180, [bridge])
    assert bridge.terminate() == 0
    assert len(kafka.read_all(dlq)) == 21 and len(kafka.read_all(out)) == 180

    log = tmp_path / "replay.log"
    slow = {**settings, "commit_interval": 60, "transaction_timeout_ms": 300_000, "batch_size": 3}
    first = _replay(log, slow, dlq, "tests.pipelines:cents_fixed_hangs")
    wait_until(lambda: "blocking forever" in log.read_text(), 120, "the replay to reach p-hang")
    # The kill lands inside an open transaction: no checkpoint before p-hang (interval 60 s).
    wait_until(lambda: open_records(kafka, out) > 0, 60, "the replay's open transaction")
    first.kill()
    first.wait(30)

    second = _replay(log, settings, dlq, "tests.pipelines:cents_fixed")
    assert second.wait(180) == 0, log.read_text()[-3000:]
    outputs = kafka.read_all(out)
    ids = Counter(orjson.loads(r.value)["id"] for r in outputs)
    assert ids == Counter({f"p{i}": 1 for i in range(200)} | {"p-hang": 1})
    assert all(not k.startswith("eos.dlq.") for r in outputs for k, _ in r.headers or ())
    assert len(kafka.read_all(dlq)) == 21  # nothing failed again
    assert (
        kafka.end_offsets(out, True) == kafka.end_offsets(out, False)
        or open_records(kafka, out) == 0
    )
