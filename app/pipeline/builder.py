"""The Python pipeline API and the loader for ``--pipeline module:attr``."""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from app.errors import ConfigError
from app.pipeline.errors import USER_ERRORS, error_text
from app.pipeline.record_steps import RecordApply, RecordFilter
from app.pipeline.rename import rename_step
from app.pipeline.stateful import Count, Dedupe, Sum, window
from app.pipeline.stateful.event_time import DEFAULT_MAX_EVENT_TIME_SKEW
from app.pipeline.steps import Apply, Filter, Step


class Pipeline:
    """A chain of steps, built fluently::

    pipeline = (
        Pipeline()
        .filter(lambda v: v["amount"] > 0)
        .map(lambda v: {"id": v["id"], "cents": int(v["amount"] * 100)})
        .key_by(lambda v: v["user"])
        .route(lambda v: "big" if v["cents"] > 10_000 else "small")
    )
    """

    def __init__(self, steps: list[Step] | None = None) -> None:
        self.steps: list[Step] = list(steps or [])

    def then(self, step: Step) -> Pipeline:
        """Append any step object (stateful steps: :mod:`app.pipeline.stateful`)."""
        self.steps.append(step)
        return self

    # record=True: the function gets a Record (value, key, headers, timestamp, topic,
    # partition, offset) instead of the value alone; see app/pipeline/record_steps.py.

    def filter(self, predicate: Callable[[Any], Any], record: bool = False) -> Pipeline:
        """Keep the records for which ``predicate`` is true."""
        return self.then(RecordFilter(predicate) if record else Filter(predicate))

    def map(self, fn: Callable[[Any], Any], record: bool = False) -> Pipeline:
        """Replace the value; None drops the record, a list fans out."""
        return self.then(RecordApply(fn) if record else Apply(fn))

    def key_by(
        self,
        fn: Callable[[Any], Any],
        record: bool = False,
        repartition: bool = True,
        partitions: int | None = None,
    ) -> Pipeline:
        """Set the key; before a stateful step the records are regrouped by it through a
        repartition topic (``partitions``: its count, default the inputs' largest) unless
        ``repartition=False`` (the input is keyed so already)."""
        return self.then(_apply(fn, record, "key", "key_by", repartition, partitions))

    def route(self, fn: Callable[[Any], str | None], record: bool = False) -> Pipeline:
        """Choose the output topic per record (None = the configured output topic)."""
        return self.then(_apply(fn, record, target="topic", name="route"))

    def rename(self, names: Mapping[str, str] | None = None, /, **more: str) -> Pipeline:
        """Rename fields of the value in place: ``.rename(user="customer")`` or
        ``.rename({"user-id": "user_id"})`` for names that are no Python identifiers."""
        return self.then(rename_step({**(names or {}), **more}))

    # Stateful steps (app.pipeline.stateful). Times are in seconds; ``name`` names the store
    # and its changelog topic: keep it stable.

    def dedupe(
        self,
        by: Any = None,
        ttl: float | None = None,
        name: str = "dedupe",
        max_event_time_skew: float | None = None,
        repartition: bool = True,
    ) -> Pipeline:
        """Drop repeats of an id (field name or function of the value; default the key); by
        a field, the records are regrouped by it first unless ``repartition=False``.

        With a ``ttl``, a record timestamp more than ``max_event_time_skew`` seconds (default:
        the smaller of one day and ``ttl``) ahead of the bridge's clock is dead-lettered
        (``InvalidEventTime``)."""
        skew = max_event_time_skew
        return self.then(
            Dedupe(ttl=ttl, by=by, name=name, max_event_time_skew=skew, repartition=repartition)
        )

    def count(self, name: str = "count") -> Pipeline:
        """Count per key; emits ``{"key", "count", "_source_*"}`` per input."""
        return self.then(Count(name=name))

    def sum(self, of: Any, name: str = "sum") -> Pipeline:
        """Sum a field (name or function of the value) per key; emits ``{"key", "sum", ...}``."""
        return self.then(Sum(of=of, name=name))

    def window(
        self,
        size: float,
        hop: float | None = None,
        grace: float = 0.0,
        timestamp: Any = None,
        name: str = "window",
        max_event_time_skew: float = DEFAULT_MAX_EVENT_TIME_SKEW,
        late_records: str = "drop",
    ) -> WindowBuilder:
        """Event-time windows (tumbling unless ``hop``); finish with ``.aggregate(...)``.

        An event time or record timestamp more than ``max_event_time_skew`` seconds ahead of
        the bridge's clock is dead-lettered (``InvalidEventTime``); late records are counted and
        dropped, or dead-lettered with ``late_records="dlq"`` (``LateRecord``).
        """
        return WindowBuilder(
            self, size, hop, grace, timestamp, name, max_event_time_skew, late_records
        )

    @property
    def stateful(self) -> bool:
        return any(step.stateful for step in self.steps)

    @property
    def rekeys(self) -> bool:
        """A step replaces the key (``key_by``)."""
        return any(getattr(step, "target", None) == "key" for step in self.steps)

    def describe(self) -> str:
        """One line for ``check-config``: ``pipeline of 5 step(s), 1 stateful: 'clicks'``
        (stateful steps by name, which names their stores and changelog topics)."""
        if not self.steps:
            return "passthrough pipeline"
        stores = [repr(step.name) for step in self.steps if step.stateful]
        if not stores:
            return f"pipeline of {len(self.steps)} stateless step(s)"
        return f"pipeline of {len(self.steps)} step(s), {len(stores)} stateful: {', '.join(stores)}"

    def __len__(self) -> int:
        return len(self.steps)


def _apply(
    fn: Callable[[Any], Any],
    record: bool,
    target: str,
    name: str,
    repartition: bool = True,
    partitions: int | None = None,
) -> Step:
    if record:
        return RecordApply(fn, target, name, repartition=repartition, partitions=partitions)
    return Apply(fn, target=target, name=name, repartition=repartition, partitions=partitions)


class WindowBuilder:
    """``Pipeline.window(...)`` waiting for its ``.aggregate(kind, of)``."""

    def __init__(self, pipeline: Pipeline, *window: Any) -> None:
        self._pipeline = pipeline
        self._window = window

    def aggregate(self, kind: str = "count", of: Any = None, **several: Any) -> Pipeline:
        """``count``, or ``sum``/``min``/``max``/``mean`` of field ``of``; emits
        ``{"key", "start", "end", "value", "_source_*"}`` once per closed window.

        Several at once, ``.aggregate(mean="amount", max="amount")``: emits ``count`` and one
        field per aggregate (``mean_amount``, ``max_amount``) instead of ``value``."""
        size, hop, grace, timestamp, name, skew, late = self._window
        what: Any = kind
        if several:
            what = ([(kind, of)] if of is not None else []) + list(several.items())
        return self._pipeline.then(window(size, hop, grace, what, of, timestamp, name, skew, late))


def as_pipeline(obj: Any) -> Pipeline:
    """A :class:`Pipeline` as is; a plain callable ``value -> value | None | list`` as a map."""
    if isinstance(obj, Pipeline):
        return obj
    if callable(obj):
        return Pipeline().map(obj)
    raise ConfigError(f"pipeline object {obj!r} is neither a Pipeline nor a callable")


def _raised(exc: BaseException) -> str:
    """``raised KeyError at /path/mod.py:12: 'x'``: the innermost frame of the user's code
    (importlib's own frames left out)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"raised {type(exc).__name__}{where}: {error_text(exc)}"


def load_pipeline(target: str) -> Pipeline:
    """Import ``module:attr`` and turn it into a :class:`Pipeline`."""
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is not None and module_name.startswith(exc.name):  # the module itself
            raise ConfigError(
                f"pipeline {target!r}: cannot import {module_name!r}: {exc} "
                f"(is its directory on PYTHONPATH?)"
            ) from None
        raise ConfigError(f"pipeline {target!r}: importing it {_raised(exc)}") from None
    except SyntaxError as exc:
        where = f"{exc.filename}:{exc.lineno}"
        raise ConfigError(f"pipeline {target!r}: syntax error in {where}: {exc.msg}") from None
    except USER_ERRORS as exc:  # its top-level code may raise anything, sys.exit(0) too
        raise ConfigError(f"pipeline {target!r}: importing it {_raised(exc)}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"pipeline {target!r}: module has no attribute {attr!r}") from None
    return as_pipeline(obj)
