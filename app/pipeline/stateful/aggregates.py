"""What a window computes: one aggregate (``count``, ``sum``, ``min``, ``max``, ``mean``) or
several at once (:class:`Combined`), folded into a JSON accumulator kept in state.

One aggregate writes ``value``; several write ``count`` (always) and one field per aggregate,
``<kind>_<field>`` (``mean_amount``), so partial results can be combined downstream: a mean
comes with the count it is the mean of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.errors import ConfigError
from app.pipeline.errors import AggregateOverflow
from app.pipeline.record import Row
from app.pipeline.stateful.kit import Extractor, FieldSpec, extractor, number, out_of_range

Part = tuple[str, FieldSpec | None]  # (kind, of)


# ---- aggregations ----------------------------------------------------------------------------


class Aggregation(Protocol):
    """Folds the values of a window into a JSON-able accumulator."""

    kind: str

    def extract(self, row: Row) -> Any: ...

    def add(self, acc: Any, value: Any) -> Any:
        """The accumulator with ``value`` folded in; raises :class:`AggregateOverflow` when it
        would leave what state and JSON can hold."""
        ...

    def result(self, acc: Any) -> Any: ...

    def fields(self, acc: Any) -> dict[str, Any]:
        """The output fields of a closed window's accumulator."""
        ...


@dataclass(slots=True)
class Aggregate:
    """``count``, or ``sum``/``min``/``max``/``mean`` of a field.

    Args:
        kind: the aggregation.
        of: field name, function of the value, or :class:`~app.pipeline.stateful.kit.RowFn`
            (required except for ``count``).
    """

    kind: str = "count"
    of: FieldSpec | None = None
    _get: Extractor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in _ADD:
            raise ConfigError(f"window aggregate {self.kind!r} is not one of {sorted(_ADD)}")
        if self.kind != "count":
            if self.of is None:
                raise ConfigError(f"window aggregate {self.kind!r} needs a field")
            self._get = extractor(self.of)

    def extract(self, row: Row) -> Any:
        return None if self._get is None else number(self._get(row), f"{self.kind} field")

    def add(self, acc: Any, value: Any) -> Any:
        new = _ADD[self.kind](acc, value)
        total = new[0] if self.kind == "mean" else new
        if out_of_range(total):
            raise AggregateOverflow(
                f"window {self.kind} would be {total!r}, outside the finite numbers within "
                f"signed 64-bit integers; the stored value is unchanged"
            )
        return new

    def result(self, acc: Any) -> Any:
        return acc[0] / acc[1] if self.kind == "mean" else acc

    def fields(self, acc: Any) -> dict[str, Any]:
        return {"value": self.result(acc)}


_ADD: dict[str, Callable[[Any, Any], Any]] = {
    "count": lambda acc, _v: (acc or 0) + 1,
    "sum": lambda acc, v: (acc or 0) + v,
    "min": lambda acc, v: v if acc is None or v < acc else acc,
    "max": lambda acc, v: v if acc is None or v > acc else acc,
    "mean": lambda acc, v: [v, 1] if acc is None else [acc[0] + v, acc[1] + 1],
}


def part_name(kind: str, of: FieldSpec | None, index: int) -> str:
    """The output field of one aggregate of several: ``mean_amount`` (``mean_<n>`` when the
    field is an expression or a function)."""
    if kind == "count":
        return "count"
    if isinstance(of, str) and of.isidentifier():
        return f"{kind}_{of}"
    return f"{kind}_{index}"


@dataclass(slots=True)
class Combined:
    """Several aggregates of one window, ``count`` always among them.

    The accumulator is ``{"count": n, <name>: <accumulator>, ...}``; a record that would take
    any of them out of range (:class:`AggregateOverflow`) changes none.
    """

    parts: list[Part]
    kind: str = "combined"
    _named: list[tuple[str, Aggregate]] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        for i, (kind, of) in enumerate(self.parts):
            if kind == "count":
                continue
            name = part_name(kind, of, i)
            if any(name == have for have, _ in self._named):
                raise ConfigError(f"window aggregates: {name!r} is given twice")
            self._named.append((name, Aggregate(kind, of)))

    def extract(self, row: Row) -> Any:
        return [agg.extract(row) for _, agg in self._named]

    def add(self, acc: Any, value: Any) -> Any:
        new = {"count": 1} if acc is None else {**acc, "count": acc["count"] + 1}
        for (name, agg), v in zip(self._named, value, strict=True):
            new[name] = agg.add(new.get(name), v)
        return new

    def result(self, acc: Any) -> Any:
        return self.fields(acc)

    def fields(self, acc: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"count": acc["count"]}
        for name, agg in self._named:
            out[name] = agg.result(acc[name])
        return out
