"""Pure pieces of the chaos suite: coordinator partition rule, nemesis plans, the table."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.chaos.faults import FAULTS
from tests.chaos.nemesis import RoundResult, Table, plan
from tests.support.chaos import Supervisor, java_hash_partition


def test_java_hash_partition_matches_kafka_utils_abs_hashcode() -> None:
    # Values of Java 17's "...".hashCode(): "" -> 0, "a" -> 97, "eos-bridge-i0" -> -1430065689
    # (negative: Utils.abs), "polygenelubricants" -> Integer.MIN_VALUE (Utils.abs gives 0).
    assert java_hash_partition("", 50) == 0
    assert java_hash_partition("a", 50) == 97 % 50
    assert java_hash_partition("eos-bridge-i0", 50) == 1430065689 % 50
    assert java_hash_partition("polygenelubricants", 50) == 0


def test_nemesis_plan_is_a_function_of_seed_and_round() -> None:
    first = [plan(7, i)[1:] for i in range(20)]
    assert first == [plan(7, i)[1:] for i in range(20)]
    assert first != [plan(8, i)[1:] for i in range(20)]
    for instances, kinds in first:
        assert instances in (2, 3) and 2 <= len(kinds) <= 3
        assert set(kinds) <= set(FAULTS) and len(set(kinds)) == len(kinds)


def test_table_counts_faults_records_and_violations() -> None:
    table = Table()
    table.add(RoundResult(0, 2, ["latency", "kill-bridge"], records=10, aborted=3))
    table.add(RoundResult(1, 3, ["latency"], records=5, error="boom"))
    text = table.render(7)
    assert table.faults["latency"] == 2 and table.records == 15 and table.aborted == 3
    assert table.violations == [1]
    assert "seed 7" in text and "latency" in text


def test_a_supervised_wait_that_times_out_says_what_it_saw_last() -> None:
    def probe_fails() -> bool:
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR))

    with pytest.raises(AssertionError) as caught:
        Supervisor([]).wait(probe_fails, 0.3, "the group to commit", lambda: "committed {0: 5}")
    message = str(caught.value)
    assert message.startswith("timed out after 0.3s waiting for the group to commit; ")
    assert "last probe error: " in message and "NOT_COORDINATOR" in message
    assert message.endswith("; committed {0: 5}")
