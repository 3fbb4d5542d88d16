"""An undo log over the steps' state, so that a record dead-lettered after a stateful step
leaves every store as it was before it (:mod:`app.engine.atomic` drives it).

:class:`JournaledAccess` hands out the state the steps see for one batch and remembers, per
view, the value each key had before its first write since the last :meth:`savepoint` and a
copy of the view's ``memo``; :meth:`rollback` puts both back. For the write-behind cache the
log is kept by :meth:`app.state.cache.PartitionState.set` itself (its ``undo``): the steps
still call the cache directly, so the batch-wise path pays one check per write. Any other
view is wrapped (:class:`JournaledView`).
"""

from __future__ import annotations

from typing import Any

from app.state.access import StateAccess, StateView
from app.state.cache import PartitionState


class _Journal:
    """The undo log of one view: what it hands the steps and how to roll it back."""

    __slots__ = ("memo_copy", "view")

    def __init__(self, view: StateView) -> None:
        self.view = view
        self.memo_copy = dict(view.memo)

    def savepoint(self) -> None:
        self.memo_copy = dict(self.view.memo)

    def rollback(self) -> None:
        memo = self.view.memo
        memo.clear()
        memo.update(self.memo_copy)

    def close(self) -> None:
        pass


class _CacheJournal(_Journal):
    """The write-behind cache's own undo log (``PartitionState.undo``)."""

    __slots__ = ("state",)

    def __init__(self, state: PartitionState) -> None:
        super().__init__(state)
        self.state = state
        state.undo = {}

    def savepoint(self) -> None:
        super().savepoint()
        self.state.undo = {}

    def rollback(self) -> None:
        state = self.state
        for key, prior in (state.undo or {}).items():
            state.restore(key, prior)
        state.undo = {}
        super().rollback()

    def close(self) -> None:
        self.state.undo = None


class JournaledView(_Journal):
    """A view that only has get/set/delete, journaled: a value read through every layer
    before its first write and written back on rollback (the same state, at a read's cost)."""

    __slots__ = ("_inner", "_undo", "get", "memo", "scan")

    def __init__(self, view: StateView) -> None:
        super().__init__(view)
        self.view = self
        self._inner = view
        self.get = view.get
        self.scan = view.scan
        self.memo = view.memo
        self._undo: dict[bytes, bytes | None] = {}

    def set(self, key: bytes, value: bytes) -> None:
        if key not in self._undo:
            self._undo[key] = self._inner.get(key)
        self._inner.set(key, value)

    def delete(self, key: bytes) -> None:
        if key not in self._undo:
            self._undo[key] = self._inner.get(key)
        self._inner.delete(key)

    def savepoint(self) -> None:
        super().savepoint()
        self._undo.clear()

    def rollback(self) -> None:
        for key, prior in self._undo.items():
            if prior is None:
                self._inner.delete(key)
            else:
                self._inner.set(key, prior)
        self._undo.clear()
        super().rollback()


class JournaledAccess:
    """The state of one batch's steps, every view journaled (a
    :class:`app.state.access.StateAccess`); a view first touched after a savepoint starts from
    what it held then, as nothing wrote it since. :meth:`close` when the batch is done."""

    __slots__ = ("_access", "_journals")

    def __init__(self, access: StateAccess) -> None:
        self._access = access
        self._journals: dict[tuple[str, str, int], _Journal] = {}

    def partition(self, store: str, topic: str, partition: int) -> Any:
        where = (store, topic, partition)
        journal = self._journals.get(where)
        if journal is None:
            view = self._access.partition(*where)
            if isinstance(view, PartitionState):
                journal = _CacheJournal(view)
            else:
                journal = JournaledView(view)
            self._journals[where] = journal
        return journal.view

    def savepoint(self) -> None:
        for journal in self._journals.values():
            journal.savepoint()

    def rollback(self) -> None:
        for journal in self._journals.values():
            journal.rollback()

    def close(self) -> None:
        """Stop journaling (the write-behind cache's writes cost nothing extra again)."""
        for journal in self._journals.values():
            journal.close()
