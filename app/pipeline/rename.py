"""The ``rename`` step: give fields of the value new names, in place.

``rename: {amount: amount_eur}`` in a spec, ``Pipeline().rename(amount="amount_eur")`` in
Python: both build the same :class:`~app.pipeline.steps.Apply` of a :class:`Renamer`, a
function of the value, so the step takes the fused fast path as any Python map does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.errors import ConfigError
from app.pipeline.steps import Apply


@dataclass(slots=True, frozen=True)
class Renamer:
    """``value`` with each field named in ``names`` renamed, its position kept.

    A renamed field replaces a field that already has the new name; ``{a: b, b: a}`` swaps.
    A field to rename that the value lacks is a ``KeyError`` (the record is dead-lettered), as a
    misspelled field in a spec expression is: a typo must not pass silently.
    """

    names: tuple[tuple[str, str], ...]
    _map: dict[str, str] = field(init=False, compare=False, repr=False)
    _replaced: frozenset[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        names = dict(self.names)
        object.__setattr__(self, "_map", names)
        object.__setattr__(self, "_replaced", frozenset(names.values()) - names.keys())

    def __call__(self, value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise TypeError(f"rename needs a JSON object, got {type(value).__name__}")
        fields: dict[str, Any] = value
        names, replaced = self._map, self._replaced
        for old in names:
            if old not in fields:
                raise KeyError(f"rename: field {old!r} is not in the value")
        return {names.get(k, k): v for k, v in fields.items() if k not in replaced}


def rename_step(names: Mapping[str, str], name: str = "rename") -> Apply:
    """The step renaming ``names`` (old → new); a ConfigError when that is not a mapping of
    field names to distinct, non-empty new names."""
    if not isinstance(names, Mapping) or not names:
        raise ConfigError(f"{name}: expected a mapping of old field name: new field name")
    for old, new in names.items():
        if not isinstance(old, str) or not isinstance(new, str) or not old or not new:
            raise ConfigError(f"{name}: field names are non-empty strings, got {old!r}: {new!r}")
    targets = list(names.values())
    clash = sorted({t for t in targets if targets.count(t) > 1})
    if clash:
        raise ConfigError(f"{name}: several fields renamed to {clash[0]!r}")
    return Apply(Renamer(tuple(names.items())), name=name)
