"""A dead letter leaves no trace in state (issue 51, acceptance 3): a record dead-lettered
after a stateful step leaves the count as it was, so the next record of its key counts exactly
one more than the one before it; on the general path (``count`` + a ``route`` to a missing
topic) and on the fused count (an output over ``max_output_bytes``).

The bridge runs as a subprocess against the session broker; every record is seeded before it
starts, so the failed records and later records of their keys share batches.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.sink.output import H_CLASS, H_OFFSET, H_PARTITION
from tests.integration.conftest import MakeBridge
from tests.support.bridge import base_settings, bridge_topics, wait_caught_up
from tests.support.kafka import KafkaFixture

pytestmark = pytest.mark.integration

PARTITIONS, KEYS, PER_PARTITION = 3, 12, 300


def _poison(offset: int) -> bool:
    return offset % 7 == 3


def _seed(kafka: KafkaFixture, src: str, pad: bool) -> dict[tuple[int, int], bytes]:
    """Keys spread over the partitions (key i to partition i % 3); returns (partition, offset)
    → key. ``pad``: the poison records carry a header that makes their output too large."""
    where: dict[tuple[int, int], bytes] = {}
    for p in range(PARTITIONS):
        keys = [
            b"k%d" % (p + PARTITIONS * (i % (KEYS // PARTITIONS))) for i in range(PER_PARTITION)
        ]
        headers = [[("pad", b"x" * 3000)] if pad and _poison(o) else [] for o in range(len(keys))]
        kafka.seed(src, [b'{"v": 1}'] * len(keys), keys, partition=p, headers=headers)
        where |= {(p, o): k for o, k in enumerate(keys)}
    return where


def _run(kafka: KafkaFixture, tmp_path: Path, bridges: MakeBridge, spec: str, pad: bool) -> None:
    src, out, dlq = bridge_topics(kafka, PARTITIONS)
    where = _seed(kafka, src, pad)
    (tmp_path / "spec.yaml").write_text(spec)
    extra = {"record_retries": 0, "state_dir": str(tmp_path / "state"), "max_output_bytes": 2000}
    settings = base_settings(
        kafka, src, out, dlq, pipeline_spec=str(tmp_path / "spec.yaml"), **extra
    )
    bridge = bridges(**settings).start()
    wait_caught_up(kafka, settings["group_id"], src, 120, [bridge])
    assert bridge.terminate() == 0
    assert "Traceback" not in bridge.logs()
    _check(kafka, out, dlq, where, "OutputTooLarge" if pad else "UnknownRouteTopic")


def _check(
    kafka: KafkaFixture, out: str, dlq: str, where: dict[tuple[int, int], bytes], error: str
) -> None:
    """Dead letters: exactly the poison records, with their class. Outputs: every other record
    once, its key's count one more than its key's previous good record's (a reference)."""
    letters = {}
    for r in kafka.read_all(dlq):
        source = (int(r.header(H_PARTITION) or b"-1"), int(r.header(H_OFFSET) or b"-1"))
        letters[source] = (r.header(H_CLASS) or b"").decode()
    poison = {s for s in where if _poison(s[1])}
    assert letters == dict.fromkeys(poison, error)
    reference: dict[tuple[int, int], int] = {}
    so_far: dict[tuple[int, bytes], int] = defaultdict(int)
    for (p, o), key in sorted(where.items()):
        if (p, o) not in poison:
            so_far[(p, key)] += 1
            reference[(p, o)] = so_far[(p, key)]
    got: dict[tuple[int, int], Any] = {}
    for r in kafka.read_all(out):
        value = orjson.loads(r.value)
        source = (value["_source_partition"], value["_source_offset"])
        assert source not in got, f"output twice for {source}"
        got[source] = value["count"]
    assert got == reference


def test_a_record_routed_nowhere_after_count_leaves_the_count_as_it_was(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    spec = """
steps:
  - count
  - route: "'no-such-topic-51' if _source_offset % 7 == 3 else None"
"""
    _run(kafka, tmp_path, bridges, spec, pad=False)


def test_an_output_too_large_of_the_fused_count_leaves_the_count_as_it_was(
    kafka: KafkaFixture, bridges: MakeBridge, tmp_path: Path
) -> None:
    _run(kafka, tmp_path, bridges, "steps:\n  - count\n", pad=True)
