"""No silent change of a value (issue 51, acceptance 5): integers of 2**64 + 1, 10**30 + 1 and
-2**63 - 1 through a passthrough and through a ``set``: each exact in the output or a dead
letter with its class, never rewritten as a float. The bridges run as subprocesses against
the session broker."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from app.sink.output import H_CLASS, H_OFFSET, H_PARTITION
from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, bridge_topics, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

NUMBERS = [2**64 + 1, 10**30 + 1, -(2**63) - 1, 2**64 - 1, -(2**63), 42]
BEYOND = 3  # the first three do not fit 64 bits


def test_integers_beyond_64_bits_are_exact_or_dead_letters(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    src, out, dlq = bridge_topics(kafka, 3)
    values = [b'{"id": %d, "n": %d}' % (i, n) for i, n in enumerate(NUMBERS)]
    for p in range(3):  # every value in every partition
        kafka.seed(src, values, partition=p)
    (tmp_path / "set.yaml").write_text('steps:\n  - set: {m: "n", twice: "id * 2"}\n')
    set_out = kafka.create_topic(kafka.unique("out-set"), 3)
    set_dlq = kafka.create_topic(kafka.unique("dlq-set"), 1)
    passthrough = base_settings(kafka, src, out, dlq)
    with_set = base_settings(kafka, src, set_out, set_dlq, pipeline_spec=str(tmp_path / "set.yaml"))
    running = [bridges(**passthrough).start(), bridges(**with_set).start()]
    for settings in (passthrough, with_set):
        wait_caught_up(kafka, settings["group_id"], src, 120, running)
    for bridge in running:
        assert bridge.terminate() == 0
        assert "Traceback" not in bridge.logs()
    # the passthrough: every record's bytes as they came
    assert sorted(r.value for r in kafka.read_all(out)) == sorted(values * 3)
    assert kafka.read_all(dlq) == []
    # the set: the integers that fit exact, the others dead letters with their class
    outputs = [orjson.loads(r.value) for r in kafka.read_all(set_out)]
    got = sorted((v["id"], v["m"], v["twice"]) for v in outputs)
    assert got == sorted([(i, NUMBERS[i], 2 * i) for i in range(BEYOND, len(NUMBERS))] * 3)
    letters = sorted(
        (
            int(r.header(H_PARTITION) or b"-1"),
            int(r.header(H_OFFSET) or b"-1"),
            (r.header(H_CLASS) or b"").decode(),
        )
        for r in kafka.read_all(set_dlq)
    )
    assert letters == [(p, o, "OutputNotEncodable") for p in range(3) for o in range(BEYOND)]
    for r in kafka.read_all(set_dlq):
        assert r.value in values[:BEYOND]  # the dead letter holds the input as it came
