"""Stateless batch steps and the context that isolates a failing record.

A step takes the batch's rows and returns the rows that go on. The fast path runs the user
function over the whole batch; only when it raises does the step fall back to one record at a
time, so a poison record is retried and then dead-lettered without failing its neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.pipeline.errors import USER_ERRORS
from app.pipeline.fusion import (
    FusedBatch,
    SpecPart,
    compile_parts,
    compile_passthrough,
    compile_verbatim,
)
from app.pipeline.record import Failure, Row
from app.serde import BytesCodec, Formats
from app.serde.json import verbatim
from app.state.access import StateAccess


@dataclass(slots=True)
class StepContext:
    """What a step may use besides its rows: retries, failures, state."""

    retries: int = 2
    failures: list[Failure] = field(default_factory=list)
    state: StateAccess | None = None

    def guarded(self, step: str, row: Row, fn: Callable[[Row], Any]) -> tuple[bool, Any]:
        """Run ``fn(row)`` with bounded retries; on final failure record it and return False."""
        try:  # the first attempt outside the loop: stateful steps call this once per record
            return True, fn(row)
        except USER_ERRORS as exc:  # a user function may raise anything
            error = exc
        for _ in range(self.retries):
            try:
                return True, fn(row)
            except USER_ERRORS as exc:
                error = exc
        self.failures.append(Failure(row, step, error))
        return False, None


class Step(Protocol):
    """One stage of a pipeline."""

    name: str
    stateful: bool

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]: ...


def reads_value(steps: list[Step]) -> bool:
    """Whether the input value must be decoded: False when the first step ignores it and
    replaces it (``reads_value = False`` on its class, e.g. ``Count``). A pipeline without
    steps writes the decoded value back, so it reads it."""
    return not steps or getattr(steps[0], "reads_value", True)


@dataclass(slots=True)
class Filter:
    """Keep the rows whose value satisfies ``predicate``."""

    predicate: Callable[[Any], Any]
    name: str = "filter"
    stateful: bool = False

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        pred = self.predicate
        try:
            return [r for r in rows if pred(r.value)]
        except USER_ERRORS:
            kept = []
            for r in rows:
                # bool() inside the guard: a result whose truth value raises is this record's fault
                ok, keep = ctx.guarded(self.name, r, lambda row: bool(pred(row.value)))
                if ok and keep:
                    kept.append(r)
            return kept


@dataclass(slots=True)
class Apply:
    """Replace each row's attribute ``target`` by ``fn(value)``.

    ``target`` is ``value`` (map), ``key`` (key_by) or ``topic`` (route). For ``value``, a
    result of None drops the row and a list fans out into several rows.
    """

    fn: Callable[[Any], Any]
    target: str = "value"
    name: str = "map"
    stateful: bool = False
    repartition: bool = True  # key_by before a stateful step: regroup (app.pipeline.split)
    partitions: int | None = None  # of the repartition topic (None: the inputs' largest count)

    def __call__(self, rows: list[Row], ctx: StepContext) -> list[Row]:
        fn = self.fn
        try:
            results = [fn(r.value) for r in rows]  # computed before any row changes
            done = rows
        except USER_ERRORS:
            results, done = [], []
            for r in rows:
                ok, result = ctx.guarded(self.name, r, lambda row: fn(row.value))
                if ok:
                    results.append(result)
                    done.append(r)
        return self.assign(done, results)

    def assign(self, done: list[Row], results: list[Any]) -> list[Row]:
        """Give each row its result (rows and results aligned); the rows that go on."""
        if self.target != "value":
            for r, result in zip(done, results, strict=True):
                setattr(r, self.target, result)
            return done
        out: list[Row] = []
        append = out.append
        for r, result in zip(done, results, strict=True):
            if type(result) is dict:  # the common case first: one check instead of two
                r.value = result
                append(r)
            elif result is None:
                continue
            elif isinstance(result, list):
                out.extend(r.derive(v) for v in result)
            else:
                r.value = result
                append(r)
        return out


# ---- the fused fast path -----------------------------------------------------------------------


def fuse(
    steps: list[Step],
    formats: Formats,
    max_bytes: int,
    topic_exists: Callable[[str], bool] | None = None,
    state: StateAccess | None = None,
) -> FusedBatch | None:
    """One pass over a batch of consumer messages that decodes, transforms, encodes and
    produces each record without building :class:`Row` objects (those are much of the general
    path's cost); see :mod:`app.pipeline.fusion` for the protocol and for what makes a record
    leave the rest of its batch to the general path.

    For a pipeline of Python filters and dict maps, or of stateless spec steps (keying and,
    given ``topic_exists``, routing included), one generated function
    (:func:`app.pipeline.fusion.compile_parts`). A pipeline that is one stateful step with a
    ``fused(state, max_bytes, formats)`` method (``count``) runs that instead, given ``state``.
    A passthrough of bytes values copies each record as it is
    (:func:`app.pipeline.fusion.compile_passthrough`). Returns None (no fast path) for anything
    else, when keys are not raw bytes, or when the input values do not decode to records.
    """
    if not formats.keys_raw:
        return None
    fused_step = getattr(steps[0], "fused", None) if len(steps) == 1 else None
    if fused_step is not None and state is not None:
        stateful: FusedBatch = fused_step(state, max_bytes, formats)
        return stateful
    if not formats.value_in.structured:
        raw = not steps and type(formats.value_out) is BytesCodec  # not translating IDs
        return compile_passthrough(max_bytes, formats) if raw else None
    if not steps and verbatim(formats.value_in, formats.value_out) is not None:
        return compile_verbatim(max_bytes, formats)
    parts: list[SpecPart] = []
    for step in steps:
        part = getattr(step, "spec_part", None)
        # Exact types: the spec's row-level subclasses call their functions with the Row.
        if part is None and type(step) is Filter:
            part = SpecPart("call_filter", step.predicate, step.name)
        elif part is None and type(step) is Apply and step.target == "value":
            part = SpecPart("call_map", step.fn, step.name)
        if part is None:
            return None
        parts.append(part)
    return compile_parts(parts, max_bytes, topic_exists, formats)
