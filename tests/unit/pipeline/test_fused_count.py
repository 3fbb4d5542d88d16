"""The fused count (``Count.fused``, P2's hot path) against the general Row path, on real
RocksDB stores: the same output bytes and the same state; where it hands the rest of a batch
back, it has produced and counted exactly the records before that point."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.pipeline import Pipeline
from app.pipeline.errors import INT64_MAX
from app.pipeline.record import Row
from app.pipeline.stateful import Count
from app.pipeline.steps import StepContext, fuse
from app.serde import formats
from app.state.keys import encode_key
from tests.support.state import LocalAccess
from tests.unit.pipeline.test_fused_path import Sink

JSON, RAW = formats(), formats("bytes")

Headers = list[tuple[str, bytes]] | None


class Msg:
    """The parts of a confluent-kafka Message the loop reads."""

    def __init__(
        self,
        key: bytes | None,
        offset: int,
        partition: int = 0,
        headers: Headers = None,
        error: Any = None,
    ) -> None:
        self._key, self._offset, self._partition = key, offset, partition
        self._headers, self._error = headers, error

    def error(self) -> Any:
        return self._error

    def value(self) -> bytes:
        return b'{"ignored": true}'

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> Headers:
        return self._headers

    def topic(self) -> str:
        return "in"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


def general(batch: list[Msg], access: LocalAccess) -> list[tuple[bytes, Any, Headers]]:
    """What the loop's general path produces for a count-only pipeline (app.sink.output.Output
    encodes a dict value with orjson and sends the row's key and headers)."""
    rows = [
        Row(m.value(), m.key(), m.headers(), m.topic(), m.partition(), m.offset(), 0) for m in batch
    ]
    ctx = StepContext(retries=0, state=access)
    rows = Count()(rows, ctx)
    assert not ctx.failures
    return [(orjson.dumps(r.value), r.key, r.headers) for r in rows]


def fused(
    batch: list[Msg], access: LocalAccess, max_bytes: int = 1_000_000
) -> tuple[int, list[tuple[bytes, Any, Headers]]]:
    """How many messages the fused count handled, and what it produced."""
    run = fuse(Pipeline().count().steps, RAW, max_bytes, None, access)
    assert run is not None
    sink = Sink()
    done, produced = run(batch, sink.produce, sink.room, "out")
    assert produced == len(sink.records) and {t for t, *_ in sink.records} <= {"out"}
    return done, [(payload, key, headers) for _, payload, key, headers in sink.records]


def state_of(access: LocalAccess) -> dict[Any, dict[bytes, bytes | None]]:
    return {tp: dict(s.dirty) for tp, s in access.states.items() if s.dirty}


keys = st.one_of(st.none(), st.sampled_from([b"a", b"b", "é".encode(), b"\xff\xfe", b""]))
batches = st.lists(
    st.lists(st.tuples(keys, st.integers(0, 2), st.booleans()), min_size=1, max_size=30),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches, st.data())
def test_fused_count_equals_the_general_path(
    stores: Callable[[str], LocalAccess], spec: list[list[Any]], data: st.DataObject
) -> None:
    """Random keys (None, non-UTF-8, empty), partitions, headers; batches commit or abort."""
    slow, fast = stores("general"), stores("fused")
    offset = 0
    for batch_spec in spec:
        batch = []
        for key, partition, with_headers in batch_spec:
            headers = [("h", b"v")] if with_headers else None
            batch.append(Msg(key, offset, partition, headers))
            offset += 1
        assert fused(batch, fast) == (len(batch), general(batch, slow))
        assert state_of(fast) == state_of(slow)
        if data.draw(st.booleans()):
            slow.commit()
            fast.commit()
        else:
            slow.discard()
            fast.discard()


def test_counts_continue_from_committed_state(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    assert fused([Msg(b"k", 0), Msg(b"k", 1)], access)[0] == 2
    access.commit()
    access.close()
    done, out = fused([Msg(b"k", 2)], LocalAccess(tmp_path))
    assert done == 1 and orjson.loads(out[0][0])["count"] == 3


def test_the_rest_of_a_batch_is_handed_back_at_the_first_unusual_record(
    tmp_path: Path,
) -> None:
    """A consumer error, an output over max_bytes or a count past INT64_MAX at index 2: the
    fused count stops there, having produced and counted exactly records 0 and 1, the same as
    the general path for them (which then counts the rest and isolates the record)."""
    slow, fast = LocalAccess(tmp_path / "general"), LocalAccess(tmp_path / "fused")
    for access in (slow, fast):
        access.partition("count", "in", 0).set(encode_key(b"big"), b"%d" % INT64_MAX)
        access.commit()
    first = [Msg(b"a", 0), Msg(b"b", 1, partition=1)]
    cases = [
        ([*first, Msg(b"c", 2, error="_TRANSPORT"), Msg(b"a", 3)], 1_000_000),
        ([*first, Msg(b"x" * 200, 2), Msg(b"a", 3)], 300),  # the key is in the value too
        ([*first, Msg(b"b", 2, 1, [("h", b"v" * 400)]), Msg(b"a", 3)], 300),  # headers count
        ([*first, Msg(b"big", 2), Msg(b"a", 3)], 1_000_000),
    ]
    for batch, max_bytes in cases:
        assert fused(batch, fast, max_bytes) == (2, general(first, slow))
        assert state_of(fast) == state_of(slow) != {}
        slow.discard()
        fast.discard()
    slow.close()
    fast.close()


def test_fused_only_for_a_count_alone_given_state(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    assert fuse(Pipeline().count().steps, JSON, 1000, None, access) is not None
    assert fuse(Pipeline().count().steps, JSON, 1000) is None  # no state: no fused count
    assert fuse(Pipeline().count().map(lambda v: v).steps, JSON, 1000, None, access) is None
    assert fuse(Pipeline().sum("n").steps, JSON, 1000, None, access) is None
