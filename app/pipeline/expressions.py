"""Spec expressions, compiled once to native Python code.

An expression is parsed with Python's :mod:`ast`, checked against simpleeval's rules (its
operator table and literal limits; no attribute access, no imports, no lambdas, calls only to
:data:`~app.pipeline.rewriter.FUNCTIONS`) and rewritten (:mod:`app.pipeline.rewriter`) so that
it runs as plain Python: a field reference ``amount``
becomes ``v["amount"]`` on the record value, the record metadata (``key``, ``headers``,
``timestamp``, ``topic``, ``partition``, ``offset``) is read only where an expression names it,
and the operators that can build huge values call a guard from :mod:`app.pipeline.guards`.
Constant sub-expressions are evaluated at compile time, so ``9**9**9`` or ``'x' * 10**10``
stop the start-up instead of failing every record.

The rewritten tree is turned back into source (:func:`ast.unparse`) and compiled into a function
by :func:`build`; that source never contains a user identifier outside a string literal.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.errors import ConfigError
from app.pipeline import guards
from app.pipeline.record import Row
from app.pipeline.rewriter import FUNCTIONS, Refused, Rewriter, call, may_be_float

# Where each metadata name comes from, on a Row (general path) and on a consumer message plus
# the current key ``k`` (fused path, app.pipeline.fusion).
ROW_META = {
    "value": "v",
    "key": "_text(row.key)",
    "headers": "_headers(row.headers)",
    "timestamp": "row.timestamp",
    "topic": "row.source_topic",
    "partition": "row.partition",
    "offset": "row.offset",
}
MESSAGE_META = {
    "value": "v",
    "key": "_text(k)",
    "headers": "_headers(m.headers())",
    "timestamp": "m.timestamp()[1]",
    "topic": "m.topic()",
    "partition": "m.partition()",
    "offset": "m.offset()",
}


@dataclass(slots=True, frozen=True)
class Translated:
    """A checked expression rewritten to native code (see :func:`translate`)."""

    code: str  # one Python expression
    uses_budget: bool  # has comprehensions: the function must define ``_b = _Budget()``


def translate(source: str, where: str, meta: dict[str, str], *, finite: bool) -> Translated:
    """Check ``source`` and rewrite it; ``finite`` adds the inf/NaN check on the result.

    Raises:
        ConfigError: syntax error, forbidden construct, or constant operands over a limit;
            one line naming ``where`` and the expression.
    """
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConfigError(
            f"pipeline spec {where}: invalid expression {source!r}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        problem = f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"pipeline spec {where}: invalid expression: {problem}") from None
    rewriter = Rewriter(meta)
    check_finite = finite and may_be_float(tree.body)  # before the rewriter changes the tree
    try:
        node = rewriter.visit(tree.body)
        if check_finite and not isinstance(node, ast.Constant):
            node = call("_finite", node)
        code = ast.unparse(ast.fix_missing_locations(node))
    except Refused as exc:
        raise ConfigError(f"pipeline spec {where}: expression {source!r}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # too deeply nested to rewrite
        raise ConfigError(f"pipeline spec {where}: expression too complex: {exc}") from None
    return Translated(code, rewriter.uses_budget)


def fields_code(fields: dict[str, str], where: str, meta: dict[str, str], keep: bool) -> Translated:
    """One dict display computing every field from the *input* value ``v`` (``{**v, ...}``
    first when ``keep``): no field expression sees another's result."""
    done = {k: translate(e, f"{where}.{k}", meta, finite=True) for k, e in fields.items()}
    items = [f"{k!r}: {t.code}" for k, t in done.items()]  # repr of a str: a str literal
    if keep:
        items.insert(0, "**v")
    return Translated("{" + ", ".join(items) + "}", any(t.uses_budget for t in done.values()))


# ---- turning translated code into functions ---------------------------------------------------


def _text(raw: Any) -> Any:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _headers(raw: list[tuple[str, bytes]] | None) -> dict[str, Any]:
    return {k: _text(v) for k, v in raw or ()}


# Generated code sees only these names: guards, allowed functions (F_*), meta helpers, and a
# few builtins of our own templates; user identifiers never become Python names.
_BUILTINS = {"type": type, "dict": dict, "len": len, "sum": sum, "Exception": Exception}


def build(source: str, name: str, where: str, extra: dict[str, Any] | None = None) -> Any:
    """Compile generated ``source`` and return its function ``name``.

    Raises:
        ConfigError: the code nests deeper than the Python compiler allows.
    """
    namespace: dict[str, Any] = {"__builtins__": _BUILTINS, "_text": _text, "_headers": _headers}
    namespace.update(guards.RUNTIME)
    namespace.update({"F_" + k: f for k, f in FUNCTIONS.items()})
    namespace.update({"F_repr": repr, "F_ascii": ascii})
    namespace.update(extra or {})
    try:
        code = compile(source, f"<spec {where}>", "exec")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ConfigError(
            f"pipeline spec {where}: expression too complex to compile: {exc}"
        ) from None
    exec(code, namespace)  # generated from checked trees only: see the module docstring
    return namespace[name]


def row_function(body: str, uses_budget: bool, where: str) -> Callable[[Row], Any]:
    """``def fn(row): return <body>`` with the value bound to ``v`` (and ``_b`` if needed)."""
    lines = ["def fn(row):", "    v = row.value"]
    if uses_budget:
        lines.append("    _b = _Budget()")
    lines.append(f"    return {body}")
    fn: Callable[[Row], Any] = build("\n".join(lines) + "\n", "fn", where)
    return fn


def row_expression(source: str, where: str, *, finite: bool = True) -> Callable[[Row], Any]:
    """The compiled function of one expression, called with a :class:`Row`.

    Args:
        source: the expression text.
        where: its place in the spec, for error messages.
        finite: refuse (per record) an inf/NaN result; off for filters (only truth counts).
    """
    done = translate(source, where, ROW_META, finite=finite)
    return row_function(done.code, done.uses_budget, where)


class Expression:
    """One compiled expression as an object (the steps call :func:`row_expression`'s function
    directly: a call through an object costs more than the expression itself)."""

    __slots__ = ("_fn", "source")

    def __init__(self, source: str, where: str, *, finite: bool = True) -> None:
        self.source = source
        self._fn = row_expression(source, where, finite=finite)

    def __call__(self, row: Row) -> Any:
        return self._fn(row)

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"
