"""A stateful batch is produced all or none; a record that fails after a stateful step is
rolled back and the batch redone record by record (app.engine.atomic)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

from app.engine.atomic import Atomic
from app.pipeline.errors import UnknownRouteTopic
from app.pipeline.record import Failure, Row
from app.pipeline.stateful.keyed import Count
from app.pipeline.steps import Apply
from app.state.keys import encode_key
from tests.support.state import LocalAccess
from tests.unit.fakes import FakeMessage


class _Output:
    """Output.send(stop=True): a row routed anywhere cannot be written; nothing after it is."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    def send(self, rows: list[Row], stop: bool = False) -> list[Failure]:
        for r in rows:
            if r.topic:
                return [Failure(r, "route", UnknownRouteTopic("missing"))]
            self.sent.append((r.offset, r.value["count"]))
        return []


def _decode(messages: list[Any]) -> tuple[list[Row], list[Failure]]:
    return [Row(None, m.key(), None, m.topic(), m.partition(), m.offset(), 0) for m in messages], []


def _phase(what: str) -> Any:
    return nullcontext()


def test_a_record_routed_nowhere_after_a_count_leaves_its_count(tmp_path: Path) -> None:
    route = Apply(lambda v: "missing" if v["_source_offset"] == 1 else None, "topic", "route")
    steps = [Count(), route]
    output = _Output()
    atomic = Atomic(steps, output, _decode, retries=0)  # type: ignore[arg-type]
    local = LocalAccess(tmp_path)
    messages = [FakeMessage(offset=o, key=b"k") for o in range(4)]
    rows, failures = _decode(messages)
    rows, failures, undo = atomic.transform(messages, rows, local, _phase)  # type: ignore[arg-type]
    assert undo.failed is False  # the route's failure is the output's
    dead = atomic.emit(rows, failures, undo, _phase)
    assert [f.row.offset for f in dead] == [1]
    assert output.sent == [(0, 1), (2, 2), (3, 3)]
    assert local.partition("count", "in", 0).get(encode_key(b"k")) == b"3"
    local.close()


def test_a_batch_without_failures_is_sent_whole(tmp_path: Path) -> None:
    output = _Output()
    atomic = Atomic([Count()], output, _decode, retries=0)  # type: ignore[arg-type]
    local = LocalAccess(tmp_path)
    messages = [FakeMessage(offset=o, key=b"k%d" % (o % 2)) for o in range(4)]
    rows, failures = _decode(messages)
    rows, failures, undo = atomic.transform(messages, rows, local, _phase)  # type: ignore[arg-type]
    assert atomic.emit(rows, failures, undo, _phase) == []
    assert output.sent == [(0, 1), (1, 1), (2, 2), (3, 2)]
    local.close()
