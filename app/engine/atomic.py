"""A dead letter leaves no trace: a record that fails at or after a stateful step leaves
every store as it was before it, and the outputs stay consistent with the state.

Steps run batch-wise, so a later record of the same key already saw a failed record's update.
A batch of a stateful pipeline therefore runs over a journaled view of the state
(:class:`app.state.journal.JournaledAccess`). When a record of it fails at or after the first
stateful step (then nothing of the batch is produced), or one of its outputs cannot be written
(a route to a missing topic, too large, not encodable: the output stops there; the outputs
before it depend on earlier records only and stay), the batch's state writes are rolled back and
the batch runs again one record at a time, each through the steps and the output checks before
the next, a failed record's writes rolled back before the next one starts; what was produced
already is not produced again. Failures are rare; that slow path may be slow, the batch-wise
path pays only the undo log. A fan-out record (a map returning a list) whose first outputs were
produced before a later one failed keeps those outputs; its state is rolled back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from app.kafka.ports import Message
from app.ops.late import LATE_LOG
from app.ops.metrics import LATE_RECORDS
from app.pipeline.record import Failure, Row
from app.pipeline.steps import Step, StepContext
from app.sink.output import Output
from app.state.access import StateAccess
from app.state.journal import JournaledAccess

Phase = Callable[[str], AbstractContextManager[None]]
Source = tuple[str, int, int]  # an input record: topic, partition, offset
Decode = Callable[[list[Message]], tuple[list[Row], list[Failure]]]


class Retries(Protocol):
    """The loop's settings, as far as a record's retries go."""

    @property
    def retries(self) -> int: ...


class Origins(Protocol):
    """Where a batch's rows came from, when that is not the message they were decoded from
    (a regrouped pipeline's tail: :class:`app.engine.regroup.Regrouper`)."""

    def restore(self, rows: list[Row], failures: list[Failure]) -> None:
        """Give each row (output or failed) the input record it came from."""

    def source(self, message: Message) -> Source:
        """The input record ``message`` came from."""
        ...


@dataclass(slots=True)
class Undo:
    """A stateful batch's undo log, its input and whether a record failed at or after the
    first stateful step."""

    journal: JournaledAccess
    messages: list[Message]
    failed: bool
    late: tuple[Counter[str], dict[str, tuple[int, str, int]]]  # the late tallies before it


def first_stateful(steps: Sequence[Step]) -> int | None:
    """The index of the pipeline's first stateful step (None: the pipeline keeps no state)."""
    return next((i for i, step in enumerate(steps) if step.stateful), None)


def run_steps(
    steps: Sequence[Step], rows: list[Row], ctx: StepContext, phase: Phase, first: int | None
) -> tuple[list[Row], bool]:
    """Run ``steps`` over ``rows`` batch-wise; the rows that go on, and whether a record failed
    at or after step ``first`` (its failures are in ``ctx.failures``)."""
    before = -1
    for i, step in enumerate(steps):
        if not rows:
            break
        if i == first:
            before = len(ctx.failures)
        with phase(f"step {step.name!r}"):
            rows = step(rows, ctx)
    return rows, before >= 0 and len(ctx.failures) > before


class Atomic:
    """Runs and produces the batches of a stateful pipeline so that a failed record leaves no
    trace (see the module's doc).

    Args:
        steps: the pipeline's steps (one of them stateful).
        output: where the rows go.
        decode: messages → rows and decoding failures (the loop's).
        retries: a step's retries per record.
        origins: the input records of a regrouped tail's rows (None: the messages').
    """

    def __init__(
        self,
        steps: Sequence[Step],
        output: Output,
        decode: Decode,
        retries: int,
        origins: Origins | None = None,
    ):
        self._steps = steps
        self._first = first_stateful(steps)
        self._output = output
        self._decode = decode
        self._retries = retries
        self._origins = origins

    @classmethod
    def of(
        cls,
        steps: Sequence[Step],
        state: StateAccess | None,
        output: Output,
        decode: Decode,
        loop: Retries,
        origins: Origins | None = None,
    ) -> Atomic | None:
        """The Atomic of ``steps`` when they keep state (None: nothing to roll back)."""
        if first_stateful(steps) is None or state is None:
            return None
        return cls(steps, output, decode, loop.retries, origins)

    def transform(
        self, messages: list[Message], rows: list[Row], state: StateAccess, phase: Phase
    ) -> tuple[list[Row], list[Failure], Undo]:
        """The batch through the steps over a journaled state: rows, failures, undo log."""
        journal = JournaledAccess(state)
        late = (Counter(LATE_RECORDS), LATE_LOG.snapshot())
        ctx = StepContext(retries=self._retries, state=journal)
        rows, failed = run_steps(self._steps, rows, ctx, phase, self._first)
        if self._origins is not None:
            self._origins.restore(rows, ctx.failures)
        return rows, ctx.failures, Undo(journal, messages, failed, late)

    def emit(
        self, rows: list[Row], failures: list[Failure], undo: Undo, phase: Phase
    ) -> list[Failure]:
        """Produce the batch's rows up to the first that cannot be written; then roll the batch
        back and run it again record by record (producing only what was not produced yet).
        Returns the failures to dead-letter."""
        try:
            produced: dict[Source, int] = {}
            if not undo.failed:
                with phase("output"):
                    unsent = self._output.send(rows, stop=True)
                if not unsent:
                    return failures
                produced = _produced(rows, unsent[0].row)
            undo.journal.rollback()
            _restore_late(undo.late)  # the batch runs again: its late records count once
            return self._one_by_one(undo, phase, produced)
        finally:
            undo.journal.close()

    def _one_by_one(self, undo: Undo, phase: Phase, produced: dict[Source, int]) -> list[Failure]:
        journal, failures = undo.journal, []
        for m in undo.messages:
            if m.error() is not None:  # reported when the batch was decoded
                continue
            rows, bad = self._decode([m])
            failures += bad
            ctx = StepContext(retries=self._retries, state=journal)
            journal.savepoint()
            rows, failed = run_steps(self._steps, rows, ctx, phase, self._first)
            source = (m.topic() or "", m.partition() or 0, m.offset() or 0)
            if self._origins is not None:
                self._origins.restore(rows, ctx.failures)
                source = self._origins.source(m)
            unsent: list[Failure] = []
            rest = rows[produced.get(source, 0) :]
            if not failed and rest:
                with phase("output"):
                    unsent = self._output.send(rest, stop=True)
            if failed or unsent:
                journal.rollback()
            failures += ctx.failures + unsent
        return failures


def _restore_late(late: tuple[Counter[str], dict[str, tuple[int, str, int]]]) -> None:
    counts, noted = late
    LATE_RECORDS.clear()
    LATE_RECORDS.update(counts)
    LATE_LOG.restore(noted)


def _produced(rows: list[Row], failed: Row) -> dict[Source, int]:
    """How many outputs of each input record were produced before ``failed``'s (rows are in
    input order: those before it depend on earlier records' state only)."""
    counts: dict[Source, int] = {}
    for row in rows:
        if row is failed:
            break
        source = (row.source_topic, row.partition, row.offset)
        counts[source] = counts.get(source, 0) + 1
    return counts
