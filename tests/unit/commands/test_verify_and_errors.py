"""The auditor's rules and the output encoding, on hand-made records (error classification:
test_error_ladder.py)."""

from __future__ import annotations

import orjson
import pytest

from app.commands import verify
from app.commands.cli import main
from app.commands.verify import IdExtractor, audit
from app.kafka.topics import KafkaRecord
from app.serde import BytesCodec, JsonCodec
from app.sink.output import H_OFFSET, H_PARTITION, H_TOPIC


def rec(topic: str, offset: int, rid: str | None) -> KafkaRecord:
    value = orjson.dumps({"id": rid}) if rid is not None else b"garbage"
    return KafkaRecord(topic, 0, offset, None, value, (), 0)


def dlq(offset: int) -> KafkaRecord:
    headers = ((H_TOPIC, b"in"), (H_PARTITION, b"0"), (H_OFFSET, str(offset).encode()))
    return KafkaRecord("dlq", 0, 0, None, b"garbage", headers, 0)


def test_audit_passes_exact_run_and_counts_dead_letters() -> None:
    inputs = [rec("in", 0, "a"), rec("in", 1, None), rec("in", 2, "b")]
    outputs = [rec("out", 0, "a"), rec("out", 1, "b")]
    report = audit(inputs, outputs, [dlq(1)], IdExtractor("id", None))
    assert report.ok
    assert report.summary() == "3 in, 2 out, 0 duplicates, 0 missing, 1 dead-lettered"


def test_audit_finds_missing_duplicate_and_unexpected() -> None:
    inputs = [rec("in", 0, "a"), rec("in", 1, "b"), rec("in", 2, "c")]
    outputs = [rec("out", 0, "a"), rec("out", 1, "a"), rec("out", 2, "z")]
    report = audit(inputs, outputs, [], IdExtractor("id", None))
    assert not report.ok
    assert report.missing == ["b", "c"]
    assert report.duplicated == ["a"]
    assert report.unexpected == ["z"]


def test_audit_respects_input_multiplicity() -> None:
    """An at-least-once upstream wrote 'a' twice: two outputs are right, not duplicates."""
    inputs = [rec("in", 0, "a"), rec("in", 1, "a")]
    report = audit(inputs, [rec("out", 0, "a"), rec("out", 1, "a")], [], IdExtractor("id", None))
    assert report.ok


def test_encoding() -> None:
    value, key = JsonCodec().encode, BytesCodec(lenient=True).encode
    assert value({"a": 1}, "t") == b'{"a":1}'
    assert value("x", "t") == b"x" and value(None, "t") is None
    assert key(7, "t") == b"7" and key(b"k", "t") == b"k" and key(None, "t") is None


def test_an_id_audit_with_missing_ids_points_at_the_pipeline_spec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A filtering pipeline's dropped records look missing to an id audit (issue 56)."""
    inputs = [rec("in", 0, "a"), rec("in", 1, "b")]
    read = (inputs, [rec("out", 0, "a")], [], {"in", "out"})
    monkeypatch.setattr(verify, "two_cluster_settings", lambda args: None)
    monkeypatch.setattr(verify, "_read_topics", lambda args, conn: read)
    argv = ["verify", "--input", "in", "--output", "out", "--id-field", "id"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "1 missing" in out and "--pipeline-spec" in out.splitlines()[-1], out
    read = (inputs, [rec("out", 0, "a"), rec("out", 1, "b")], [], {"in", "out"})
    assert main(argv) == 0
    assert "--pipeline-spec" not in capsys.readouterr().out  # nothing missing: no hint
