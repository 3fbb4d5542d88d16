"""The fused count (``Count.fused``, P2's hot path) against the general Row path, on real
RocksDB stores: the same output bytes and the same state, and a batch it hands back has
changed nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.pipeline import Pipeline
from app.pipeline.errors import INT64_MAX
from app.pipeline.record import Row
from app.pipeline.stateful import Count
from app.pipeline.steps import StepContext, fuse
from app.state.keys import encode_key
from tests.support.state import LocalAccess

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
    """What the loop's general path produces for a count-only pipeline (app.output.Output
    encodes a dict value with orjson and sends the row's key and headers)."""
    rows = [
        Row(m.value(), m.key(), m.headers(), m.topic(), m.partition(), m.offset(), 0) for m in batch
    ]
    ctx = StepContext(retries=0, state=access)
    rows = Count()(rows, ctx)
    assert not ctx.failures
    return [(orjson.dumps(r.value), r.key, r.headers) for r in rows]


def fused(batch: list[Msg], access: LocalAccess, max_bytes: int = 1_000_000) -> Any:
    run = fuse(Pipeline().count().steps, False, max_bytes, None, access)
    assert run is not None
    out = run(batch)
    return None if out is None else [(payload, key, headers) for payload, key, headers, _ in out]


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
    tmp_path_factory: pytest.TempPathFactory, spec: list[list[Any]], data: st.DataObject
) -> None:
    """Random keys (None, non-UTF-8, empty), partitions, headers; batches commit or abort."""
    slow = LocalAccess(tmp_path_factory.mktemp("general"))
    fast = LocalAccess(tmp_path_factory.mktemp("fused"))
    offset = 0
    for batch_spec in spec:
        batch = []
        for key, partition, with_headers in batch_spec:
            headers = [("h", b"v")] if with_headers else None
            batch.append(Msg(key, offset, partition, headers))
            offset += 1
        assert fused(batch, fast) == general(batch, slow)
        assert state_of(fast) == state_of(slow)
        if data.draw(st.booleans()):
            slow.commit()
            fast.commit()
        else:
            slow.discard()
            fast.discard()
    slow.close()
    fast.close()


def test_counts_continue_from_committed_state(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    assert fused([Msg(b"k", 0), Msg(b"k", 1)], access) is not None
    access.commit()
    access.close()
    out = fused([Msg(b"k", 2)], LocalAccess(tmp_path))
    assert out is not None and orjson.loads(out[0][0])["count"] == 3


def test_a_batch_handed_back_changed_no_state(tmp_path: Path) -> None:
    """A consumer error, an output over max_bytes or a count past INT64_MAX: None, and the
    state is as before the batch (the general path then counts the batch itself)."""
    access = LocalAccess(tmp_path)
    assert fused([Msg(b"a", 0), Msg(b"b", 1, partition=1)], access) is not None
    before = state_of(access)
    assert before  # the batch above is uncommitted: it must survive the hand-backs below
    cases = [
        ([Msg(b"a", 2), Msg(b"b", 3, 1), Msg(b"c", 4, error="_TRANSPORT")], 1_000_000),
        ([Msg(b"a", 2), Msg(b"x" * 200, 3)], 300),  # key repeated in the value: over the bound
        ([Msg(b"a", 2), Msg(b"b", 3, 1, [("h", b"v" * 400)])], 300),  # headers count too
    ]
    for batch, max_bytes in cases:
        assert fused(batch, access, max_bytes) is None
        assert state_of(access) == before
    access.partition("count", "in", 0).set(encode_key(b"big"), b"%d" % INT64_MAX)
    before = state_of(access)
    assert fused([Msg(b"a", 5), Msg(b"big", 6)], access) is None
    assert state_of(access) == before


def test_fused_only_for_a_count_alone_given_state(tmp_path: Path) -> None:
    access = LocalAccess(tmp_path)
    assert fuse(Pipeline().count().steps, True, 1000, None, access) is not None
    assert fuse(Pipeline().count().steps, True, 1000) is None  # no state: no fused count
    assert fuse(Pipeline().count().map(lambda v: v).steps, True, 1000, None, access) is None
    assert fuse(Pipeline().sum("n").steps, True, 1000, None, access) is None
