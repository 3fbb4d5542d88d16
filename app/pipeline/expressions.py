"""Field expressions for declarative pipelines, evaluated by the ``simpleeval`` library.

An expression sees the record's value fields as names, plus ``value``, ``key``, ``headers``
(str → str), ``timestamp``, ``topic``, ``partition`` and ``offset``. It is parsed once, when
the spec is compiled, so a syntax error stops the start-up with the offending text.
"""

from __future__ import annotations

import ast
from typing import Any

from simpleeval import EvalWithCompoundTypes

from app.errors import ConfigError
from app.pipeline.record import Row

_SAFE_FUNCTIONS = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "len": len,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "lower": lambda s: str(s).lower(),
    "upper": lambda s: str(s).upper(),
}


class Expression:
    """One compiled expression; call it with a :class:`Row`."""

    __slots__ = ("_evaluator", "_parsed", "source")

    def __init__(self, source: str, where: str) -> None:
        self.source = source
        self._evaluator = EvalWithCompoundTypes(functions=_SAFE_FUNCTIONS)
        try:
            self._parsed: ast.AST = self._evaluator.parse(source)
        except SyntaxError as exc:
            raise ConfigError(
                f"pipeline spec {where}: invalid expression {source!r}: {exc}"
            ) from None

    def __call__(self, row: Row) -> Any:
        value = row.value
        names: dict[str, Any] = dict(value) if isinstance(value, dict) else {}
        names.update(
            value=value,
            key=_text(row.key),
            headers={k: _text(v) for k, v in row.headers or ()},
            timestamp=row.timestamp,
            topic=row.source_topic,
            partition=row.partition,
            offset=row.offset,
        )
        self._evaluator.names = names
        return self._evaluator.eval(self.source, previously_parsed=self._parsed)

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"


def _text(raw: Any) -> Any:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
