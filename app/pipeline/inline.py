"""Inline a one-expression Python step into the fused loop instead of calling it per record.

``Pipeline().filter(keep).map(enrich)`` with ``def keep(value): return value["amount"] >= 5``
costs the fused loop (:mod:`app.pipeline.fusion`) one Python call per step per record. When a
step's function is nothing but ``return <expression>`` over its one parameter, the loop can
evaluate the expression itself: ``if not (v['amount'] >= 5): continue``.

Only what is certainly the same is inlined (anything else keeps the call):

* a plain function (no lambda, closure, default, ``*args``/``**kwargs``, decorator wrapper,
  generator or coroutine) of exactly one positional parameter;
* its source (``inspect.getsource``) parses to ``def f(x): ["docstring"] return <expr>`` and
  compiles to the very bytecode, constants and names of the running function (a file edited
  since the import is not inlined);
* the expression names nothing but the parameter and builtins the function's module does not
  shadow, and has no lambda, comprehension, ``:=``, ``yield`` or ``await`` (their scoping
  would differ in the loop); builtins are bound once, at compile time, under ``B_<name>``.

Errors behave as before: an exception in the fused loop hands the record to the general path,
which calls the function itself and isolates the record exactly as without inlining.

:func:`finite_by_construction` tells when an inlined map cannot put NaN/inf in its output given
JSON input (which orjson never decodes to NaN/inf), so the loop can skip the per-record
``null_in`` check that a called map needs.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_UNSAFE = (
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.NamedExpr,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
)
_NOT_PLAIN = (
    inspect.CO_VARARGS
    | inspect.CO_VARKEYWORDS
    | inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ITERABLE_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
)


@dataclass(slots=True, frozen=True)
class Inlined:
    """The function's expression as loop source over ``v``, and the builtins it needs."""

    code: str
    names: dict[str, Any]
    tree: ast.expr


def inline(fn: Callable[..., Any]) -> Inlined | None:
    """``fn``'s return expression rewritten over ``v``, or None when it cannot be inlined."""
    expr, param = _expression(fn)
    if expr is None or param is None or not isinstance(fn, types.FunctionType):
        return None
    names: dict[str, Any] = {}
    for node in ast.walk(expr):
        if isinstance(node, _UNSAFE):
            return None
        if isinstance(node, ast.Name) and node.id != param:
            found = _builtin(fn, node.id)
            if found is None:
                return None
            names[f"B_{node.id}"] = found
    tree = _Rename(param).visit(expr)
    return Inlined(f"({ast.unparse(tree)})", names, tree)


def _expression(fn: Callable[..., Any]) -> tuple[ast.expr | None, str | None]:
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        return None, None
    code = fn.__code__
    if (
        fn.__closure__
        or fn.__defaults__
        or fn.__kwdefaults__
        or hasattr(fn, "__wrapped__")
        or code.co_argcount != 1
        or code.co_kwonlyargcount
        or code.co_posonlyargcount
        or code.co_flags & _NOT_PLAIN
    ):
        return None, None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None, None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None, None
    fdef = tree.body[0]
    body = fdef.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if (
        fdef.decorator_list
        or len(body) != 1
        or not isinstance(body[0], ast.Return)
        or body[0].value is None
        or not _same_code(tree, fn)
    ):
        return None, None
    return body[0].value, fdef.args.args[0].arg


def _same_code(tree: ast.Module, fn: types.FunctionType) -> bool:
    """Whether the parsed source compiles to ``fn``'s own code (not a file edited since)."""
    try:
        module = compile(tree, fn.__code__.co_filename, "exec")
    except (SyntaxError, ValueError):
        return False
    mine = next((c for c in module.co_consts if isinstance(c, types.CodeType)), None)
    theirs = fn.__code__
    return (
        mine is not None
        and mine.co_code == theirs.co_code
        and mine.co_consts == theirs.co_consts
        and mine.co_names == theirs.co_names
        and mine.co_varnames == theirs.co_varnames
    )


def _builtin(fn: types.FunctionType, name: str) -> Any:
    """The builtin ``name`` as ``fn`` sees it, or None (a module global, or no builtin)."""
    if name in fn.__globals__ or not hasattr(builtins, name):
        return None
    return getattr(builtins, name)


class _Rename(ast.NodeTransformer):
    def __init__(self, param: str) -> None:
        self._param = param

    def visit_Name(self, node: ast.Name) -> ast.Name:
        name = "v" if node.id == self._param else f"B_{node.id}"
        return ast.copy_location(ast.Name(id=name, ctx=node.ctx), node)


_NO_FLOAT_CALLS = frozenset({"B_int", "B_str", "B_bool", "B_len"})


def finite_by_construction(tree: ast.expr) -> bool:
    """Whether a map expression can only copy decoded values (finite with JSON input) and
    make ints, strings, bools and finite constants: a dict, list or tuple of those, or one."""
    if isinstance(tree, ast.Dict):
        return all(k is not None for k in tree.keys) and all(
            finite_by_construction(x) for x in tree.values
        )
    if isinstance(tree, ast.List | ast.Tuple):
        return all(finite_by_construction(x) for x in tree.elts)
    if isinstance(tree, ast.Constant):
        return not isinstance(tree.value, float | complex) or tree.value - tree.value == 0
    if isinstance(tree, ast.Call):
        return isinstance(tree.func, ast.Name) and tree.func.id in _NO_FLOAT_CALLS
    while isinstance(tree, ast.Subscript):
        if not isinstance(tree.slice, ast.Constant):
            return False
        tree = tree.value
    return isinstance(tree, ast.Name) and tree.id == "v"
