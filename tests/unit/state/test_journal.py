"""The undo log over the write-behind cache (app.state.journal): a rollback puts back every
value, deletion, byte count and memo entry as they were at the savepoint."""

from __future__ import annotations

from pathlib import Path

from app.state.journal import JournaledAccess
from tests.support.state import LocalAccess


def test_rollback_restores_dirty_values_bytes_and_memo(tmp_path: Path) -> None:
    local = LocalAccess(tmp_path)
    state = local.partition("s", "in", 0)
    state.set(b"committed", b"1")
    local.commit()
    state.set(b"dirty", b"a")
    state.memo["t"] = 5
    before = (dict(state.dirty), state.nbytes, local.budget.used, dict(state.memo))
    journal = JournaledAccess(local)
    view = journal.partition("s", "in", 0)
    view.set(b"dirty", b"bbbb")
    view.set(b"dirty", b"cc")
    view.set(b"new", b"x")
    view.delete(b"committed")
    view.memo["t"] = 9
    view.memo["closed_to"] = 3
    assert view.get(b"committed") is None and view.get(b"dirty") == b"cc"
    journal.rollback()
    assert (dict(state.dirty), state.nbytes, local.budget.used, dict(state.memo)) == before
    assert view.get(b"committed") == b"1"
    local.close()


def test_a_savepoint_keeps_what_came_before_it(tmp_path: Path) -> None:
    local = LocalAccess(tmp_path)
    journal = JournaledAccess(local)
    view = journal.partition("s", "in", 0)
    view.set(b"k", b"1")
    journal.savepoint()
    view.set(b"k", b"2")
    view.set(b"other", b"2")
    journal.rollback()
    assert local.partition("s", "in", 0).dirty == {b"k": b"1"}
    local.close()


class _Plain:
    """A view with get/set/delete only."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {b"k": b"1"}
        self.memo: dict[str, object] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def set(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)

    def scan(self, lower: bytes, upper: bytes) -> list[tuple[bytes, bytes]]:
        return sorted((k, v) for k, v in self.data.items() if lower <= k < upper)


class _PlainAccess:
    def __init__(self) -> None:
        self.view = _Plain()

    def partition(self, store: str, topic: str, partition: int) -> _Plain:
        return self.view


def test_a_view_without_an_uncommitted_layer_is_restored_through_get_and_set() -> None:
    access = _PlainAccess()
    journal = JournaledAccess(access)
    view = journal.partition("s", "in", 0)
    view.set(b"k", b"2")
    view.set(b"n", b"3")
    journal.rollback()
    assert access.view.data == {b"k": b"1"}
