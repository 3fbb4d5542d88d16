"""``dlq replay``'s pure parts: a dead letter back to the input record it was, the late rule,
the summary, and the refused ``--pipeline`` (one line, exit 2)."""

from __future__ import annotations

from app.commands.lateness import Lateness, latest_window_end
from app.commands.replay import Summary, resend
from app.kafka.topics import KafkaRecord
from app.kafka.transfer import Outgoing
from app.pipeline.builder import Pipeline
from tests.support.cli import eos_bridge_here

HOUR = 3_600_000
T0 = 1_772_359_200_000  # 2026-03-01T10:00Z


def _letter(offset: int = 7, **extra: bytes) -> KafkaRecord:
    headers = {
        "trace": b"abc",
        "eos.dlq.source.topic": b"clicks",
        "eos.dlq.source.partition": b"2",
        "eos.dlq.source.offset": b"41",
        "eos.dlq.source.timestamp": str(T0).encode(),
        "eos.dlq.error.class": b"KeyError",
        "eos.dlq.error.step": b"steps[0].set",
        "eos.dlq.history.error.class": b"Old",
        **extra,
    }
    return KafkaRecord("dlq", 0, offset, b"ana", b'{"a":1}', tuple(headers.items()), T0 + HOUR)


def test_a_dead_letter_goes_back_to_its_partition_with_its_timestamp_and_provenance() -> None:
    made = resend(_letter(), {"clicks": 3}, None, "run-1")
    assert isinstance(made, Outgoing)
    assert (made.topic, made.partition, made.key, made.value, made.timestamp) == (
        "clicks",
        2,
        b"ana",
        b'{"a":1}',
        T0,
    )
    headers = dict(made.headers)
    assert not any(k.startswith("eos.dlq.") for k in headers)
    assert headers["trace"] == b"abc"
    assert headers["eos.replay.run"] == b"run-1"
    assert (headers["eos.replay.dlq.topic"], headers["eos.replay.dlq.offset"]) == (b"dlq", b"7")
    assert headers["eos.replay.source.offset"] == b"41"
    assert headers["eos.replay.error.class"] == b"KeyError"


def test_what_cannot_go_back_is_skipped_with_a_reason() -> None:
    assert "not an input topic" in str(resend(_letter(), {"other": 3}, None, "r"))
    assert "does not exist" in str(resend(_letter(), {"clicks": 2}, None, "r"))
    dropped = _letter(**{"eos.dlq.value.dropped.bytes": b"2000000"})
    assert "value" in str(resend(dropped, {"clicks": 3}, None, "r"))
    bare = KafkaRecord("dlq", 0, 1, None, b"x", (), 0)
    assert "headers" in str(resend(bare, {"clicks": 3}, None, "r"))


def test_to_a_topic_is_placed_by_key() -> None:
    made = resend(_letter(), {}, "copy", "r")
    assert isinstance(made, Outgoing) and (made.topic, made.partition) == ("copy", -1)


def test_a_record_whose_last_window_closed_is_late() -> None:
    assert latest_window_end(T0 + 5, HOUR, HOUR) == T0 + HOUR
    assert latest_window_end(T0 + 5, HOUR, HOUR // 4) == T0 + HOUR
    lateness = Lateness(Pipeline().window(3600, grace=1800).aggregate("count"), True)
    assert lateness.graces == {"window": 1_800_000}

    def at(ts: int, partition: int = 0) -> KafkaRecord:
        return KafkaRecord("in", partition, 0, b"k", b"{}", (), ts)

    lateness.observe([at(T0 + HOUR + HOUR // 2)])  # stream time 11:30: hour 10 closed
    lateness.judge(at(T0 + 1))  # closed at 11:30
    lateness.judge(at(T0 + HOUR))  # hour 11, open
    lateness.judge(at(T0 + 1, partition=1))  # another partition, no clock yet
    assert lateness.late["window"] == 1


def test_an_event_time_field_is_read_from_the_value() -> None:
    lateness = Lateness(Pipeline().window(3600, timestamp="ts").aggregate("count"), True)
    lateness.observe([KafkaRecord("in", 0, 0, None, b'{"ts": %d}' % (T0 + 2 * HOUR), (), 0)])
    lateness.judge(KafkaRecord("in", 0, 1, None, b'{"ts": %d}' % T0, (), 0))
    lateness.judge(KafkaRecord("in", 0, 2, None, b'{"no": 1}', (), 0))
    assert (lateness.late["window"], lateness.unknown["window"]) == (1, 1)


def test_the_summary_says_nothing_left_or_what_it_did() -> None:
    lateness = Lateness(Pipeline(), True)
    assert Summary("dlq", ends={0: 4}).lines(lateness, {}) == [
        "nothing left to replay in 'dlq' (read up to {0: 4})"
    ]
    done = Summary("dlq", read=3, produced=2, again=1, ends={0: 4})
    done.skipped["why"] += 1
    lines = done.lines(lateness, {})
    assert "read 3, produced 2, skipped 1; 1 of those read had failed again" in lines[0]
    assert lines[1] == "skipped 1: why"


def test_pipeline_is_refused_in_one_line_naming_the_new_way() -> None:
    result = eos_bridge_here(
        "dlq",
        "replay",
        "dlq",
        "--pipeline",
        "m:p",
        env={"BRIDGE_INPUT_TOPICS": "in", "BRIDGE_OUTPUT_TOPIC": "out"},
    )
    assert result.code == 2
    line = result.one_line_error()
    assert "--pipeline" in line and "running bridge" in line


def test_two_clusters_are_refused_without_to_in_one_line() -> None:
    result = eos_bridge_here(
        "dlq",
        "replay",
        "dlq",
        env={
            "BRIDGE_INPUT_TOPICS": "in",
            "BRIDGE_OUTPUT_TOPIC": "out",
            "BRIDGE_TARGET__BOOTSTRAP_SERVERS": "127.0.0.1:1",
        },
    )
    assert result.code == 2
    line = result.one_line_error()
    assert "target.bootstrap_servers" in line and "--to" in line
