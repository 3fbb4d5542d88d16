"""The rules of spec expressions, applied while rewriting their tree to native code.

:class:`Rewriter` walks the tree :func:`ast.parse` made, refuses what the rules forbid
(simpleeval's operator table and literal limits; attribute access, dunder names, lambdas, ``:=``,
set comprehensions, calls outside :data:`FUNCTIONS`) and rewrites the rest: field references to
``v[...]`` lookups, metadata names to their sources, bounded operators to guard calls
(:mod:`app.pipeline.guards`), constant operations to their value, computed now.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from functools import partial
from typing import Any

from simpleeval import DEFAULT_OPERATORS, MAX_STRING_LENGTH

from app.errors import ExpressionLimit
from app.pipeline import guards


def _lower(s: Any) -> str:
    return str(s).lower()


def _upper(s: Any) -> str:
    return str(s).upper()


# The functions an expression may call (simpleeval's defaults, its compound types, and ours).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "len": len,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "lower": _lower,
    "upper": _upper,
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "set": set,
}

_ALLOWED_OPS = frozenset(DEFAULT_OPERATORS)  # simpleeval's operator table (no @, no :=)
# Node types passed through as they are (after their children are checked).
_PLAIN = (
    ast.Expression,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Subscript,
    ast.Slice,
    ast.Dict,
    ast.Tuple,
    ast.Set,
    ast.List,
    ast.Starred,
    ast.JoinedStr,
    ast.Load,
    ast.boolop,
    ast.cmpop,
    ast.unaryop,
    ast.operator,
    ast.keyword,
)
_GUARDED = {ast.Pow: "_power", ast.Mult: "_multiply", ast.Add: "_add", ast.LShift: "_lshift"}
_FOLD: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Pow: guards.power,
    ast.Mult: guards.multiply,
    ast.Add: guards.add,
    ast.LShift: guards.lshift,
    ast.Mod: guards.modulo,
    ast.Sub: operator.sub,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
_CONVERSIONS = {ord("s"): "str", ord("r"): "repr", ord("a"): "ascii"}
_MAY_BE_FLOAT_CALLS = frozenset({"float", "abs", "min", "max", "round"})


class Refused(Exception):
    """An expression breaks a rule; becomes a ConfigError naming the step."""


def may_be_float(node: ast.expr) -> bool:
    """Whether a result could be an inf/NaN float (data from JSON never is; constants that are
    get refused), so that its check can be left out of, e.g., ``'a' if x else None``."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in _MAY_BE_FLOAT_CALLS
    if isinstance(node, ast.IfExp):
        return may_be_float(node.body) or may_be_float(node.orelse)
    if isinstance(node, ast.BoolOp):
        return any(may_be_float(v) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return not isinstance(node.op, ast.Not | ast.Invert) and may_be_float(node.operand)
    return isinstance(node, ast.BinOp)


def call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(name, ast.Load()), args=list(args), keywords=[])


def _number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


class Rewriter(ast.NodeTransformer):
    """Checks each node against the rules while rewriting it to native code.

    Args:
        meta: metadata name → the code that reads it (``ROW_META``/``MESSAGE_META``).
    """

    def __init__(self, meta: dict[str, str]) -> None:
        self._meta = meta
        self._bound: set[str] = set()  # names bound by enclosing comprehensions
        self.uses_budget = False

    def visit(self, node: ast.AST) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        if isinstance(node, _PLAIN):
            return self.generic_visit(node)
        raise Refused(f"{type(node).__name__} is not allowed")

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, str | bytes) and len(node.value) > MAX_STRING_LENGTH:
            raise Refused(f"a literal longer than {MAX_STRING_LENGTH}")
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        name = node.id
        if name.startswith("__"):
            raise Refused(f"name {name!r}: dunder names are not allowed")
        if name in self._bound:
            return ast.Name("c_" + name, ast.Load())
        if name in self._meta:
            return ast.parse(self._meta[name], mode="eval").body
        if name in FUNCTIONS:
            return ast.Name("F_" + name, ast.Load())
        return ast.Subscript(ast.Name("v", ast.Load()), ast.Constant(name), ast.Load())

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        raise Refused(f"attribute access (.{node.attr}) is not allowed")

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        if not isinstance(func, ast.Name) or func.id not in FUNCTIONS or func.id in self._bound:
            called = func.id if isinstance(func, ast.Name) else ast.unparse(func)
            raise Refused(f"calling {called!r} is not allowed (allowed: {', '.join(FUNCTIONS)})")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise Refused("*args/**kwargs in calls are not allowed")
        args = [self.visit(a) for a in node.args]
        keywords = [ast.keyword(k.arg, self.visit(k.value)) for k in node.keywords]
        return ast.Call(ast.Name("F_" + func.id, ast.Load()), args, keywords)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        operand = self.visit(node.operand)
        fold = _UNARY.get(type(node.op))
        if fold is not None and isinstance(operand, ast.Constant):
            return _constant(lambda: fold(operand.value), ast.UnaryOp(node.op, operand))
        return ast.UnaryOp(node.op, operand)

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        op = type(node.op)
        if op not in _ALLOWED_OPS:
            raise Refused(f"operator {op.__name__} is not allowed")
        left, right = self.visit(node.left), self.visit(node.right)
        native = ast.BinOp(left, node.op, right)
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
            return _constant(lambda: _FOLD[op](left.value, right.value), native)
        if op is ast.Mult:  # a list display repeated by a constant: checked once
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, ast.List | ast.Tuple) and isinstance(times, ast.Constant):
                    _checked(partial(guards.check_repeat, seq.elts, times.value))
        if op is ast.Mod:
            template = left.value if isinstance(left, ast.Constant) else None
            if isinstance(template, str):
                _checked(lambda: guards.check_format(template.encode()))  # checked once
                return native
            return native if _number(left) else call("_modulo", left, right)
        guard = _GUARDED.get(op)
        if guard is None or _safe_native(op, left, right):
            return native
        guarded = call(guard, left, right)
        constants_are_numbers = all(
            _number(n) for n in (left, right) if isinstance(n, ast.Constant)
        )
        if op in (ast.Mult, ast.Add) and _cheap(left) and _cheap(right) and constants_are_numbers:
            # Numbers cannot grow big here: skip the guard's call for them (the operands are
            # side-effect free lookups, so reading them twice changes nothing).
            tests = [_numeric(n) for n in (left, right) if not isinstance(n, ast.Constant)]
            return ast.IfExp(
                ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0], native, guarded
            )
        return guarded

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.expr:
        value = self.visit(node.value)
        if node.format_spec is None:
            return ast.FormattedValue(value, node.conversion, None)
        spec = self.visit(node.format_spec)
        if all(isinstance(part, ast.Constant) for part in spec.values):  # checked once
            _checked(lambda: guards.check_format("".join(p.value for p in spec.values).encode()))
            return ast.FormattedValue(value, node.conversion, spec)
        if node.conversion != -1:
            value = call("F_" + _CONVERSIONS[node.conversion], value)
        return ast.FormattedValue(call("_format", value, spec), -1, None)

    def visit_ListComp(self, node: ast.ListComp) -> ast.expr:
        return self._comprehension(node, lambda gens: ast.ListComp(self._kept(node.elt), gens))

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.expr:
        return self._comprehension(node, lambda gens: ast.GeneratorExp(self._kept(node.elt), gens))

    def visit_DictComp(self, node: ast.DictComp) -> ast.expr:
        return self._comprehension(
            node, lambda gens: ast.DictComp(self._kept(node.key), self._kept(node.value), gens)
        )

    def _kept(self, node: ast.expr) -> ast.expr:
        """``_b.keep(<node>)``: an element a comprehension produces is charged to the budget."""
        keep = ast.Attribute(ast.Name("_b", ast.Load()), "keep", ast.Load())
        return ast.Call(keep, [self.visit(node)], [])

    def _comprehension(
        self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, finish: Any
    ) -> ast.expr:
        """Loop variables become ``c_<name>`` locals; every iterable is charged to ``_b``."""
        self.uses_budget = True
        outer = set(self._bound)
        generators = []
        for gen in node.generators:
            if gen.is_async:
                raise Refused("async comprehensions are not allowed")
            items = ast.Call(
                ast.Attribute(ast.Name("_b", ast.Load()), "each", ast.Load()),
                [self.visit(gen.iter)],
                [],
            )
            target = self._target(gen.target)
            ifs = [self.visit(test) for test in gen.ifs]
            generators.append(ast.comprehension(target, items, ifs, 0))
        try:
            return finish(generators)  # type: ignore[no-any-return]
        finally:
            self._bound = outer

    def _target(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise Refused(f"name {node.id!r}: dunder names are not allowed")
            self._bound.add(node.id)
            return ast.Name("c_" + node.id, ast.Store())
        if isinstance(node, ast.Tuple | ast.List):
            return ast.Tuple([self._target(e) for e in node.elts], ast.Store())
        raise Refused(f"comprehension target {ast.unparse(node)!r} is not allowed")


def _cheap(node: ast.expr) -> bool:
    """A constant, a name or a constant subscript of a name (a field): cheap to read twice."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant)
    return isinstance(node, ast.Constant | ast.Name)


def _numeric(node: ast.expr) -> ast.expr:
    """``type(<node>) in _NUMERIC``."""
    test = ast.Call(ast.Name("type", ast.Load()), [node], [])
    return ast.Compare(test, [ast.In()], [ast.Name("_NUMERIC", ast.Load())])


def _safe_native(op: type[ast.operator], left: ast.expr, right: ast.expr) -> bool:
    """Operands that make the guard pointless: a number added, a float multiplier/exponent."""
    if op is ast.Add:
        return _number(left) or _number(right)
    floats = [n for n in (left, right) if isinstance(n, ast.Constant) and type(n.value) is float]
    if op is ast.Mult:
        return bool(floats)
    return op is ast.Pow and isinstance(right, ast.Constant) and type(right.value) is float


def _constant(compute: Callable[[], Any], unfolded: ast.expr) -> ast.expr:
    """Fold a constant operation now; over a limit or failing, refuse the expression."""
    value = _checked(compute)
    if isinstance(value, float) and not math.isfinite(value):
        raise Refused(f"{ast.unparse(unfolded)} is {value}")
    if isinstance(value, int) and value.bit_length() > 1000:
        return unfolded  # within the limits, but too long a literal; computed per record
    return ast.Constant(value)


def _checked(compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except ExpressionLimit as exc:
        raise Refused(f"over a limit: {exc}") from None
    except Exception as exc:  # e.g. 1/0: it would fail every record
        raise Refused(f"{type(exc).__name__}: {exc}") from None
