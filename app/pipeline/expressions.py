"""Spec expressions, compiled once to native Python code.

An expression is parsed with Python's :mod:`ast`, checked against simpleeval's rules (its
operator table and literal limits; no attribute access, no imports, no lambdas, calls only to
:data:`FUNCTIONS`) and rewritten so that it runs as plain Python: a field reference ``amount``
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
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from simpleeval import DEFAULT_OPERATORS, MAX_STRING_LENGTH

from app.errors import ConfigError, ExpressionLimit
from app.pipeline import guards
from app.pipeline.record import Row


def _lower(s: Any) -> str:
    return str(s).lower()


def _upper(s: Any) -> str:
    return str(s).upper()


# The functions an expression may call (simpleeval's defaults, its compound types, and ours).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "str": str, "int": int, "float": float, "bool": bool, "len": len, "abs": abs,
    "min": min, "max": max, "round": round, "lower": _lower, "upper": _upper,
    "list": list, "tuple": tuple, "dict": dict, "set": set,
}  # fmt: skip

# Where each metadata name comes from, on a Row (general path) and on a consumer message plus
# the current key ``k`` (fused path, app.pipeline.fusion).
ROW_META = {
    "value": "v", "key": "_text(row.key)", "headers": "_headers(row.headers)",
    "timestamp": "row.timestamp", "topic": "row.source_topic", "partition": "row.partition",
    "offset": "row.offset",
}  # fmt: skip
MESSAGE_META = {
    "value": "v", "key": "_text(k)", "headers": "_headers(m.headers())",
    "timestamp": "m.timestamp()[1]", "topic": "m.topic()", "partition": "m.partition()",
    "offset": "m.offset()",
}  # fmt: skip

_ALLOWED_OPS = frozenset(DEFAULT_OPERATORS)  # simpleeval's operator table (no @, no :=)
# Node types passed through as they are (after their children are checked).
_PLAIN = (
    ast.Expression, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript, ast.Slice, ast.Dict,
    ast.Tuple, ast.Set, ast.List, ast.Starred, ast.JoinedStr, ast.Load, ast.boolop,
    ast.cmpop, ast.unaryop, ast.operator, ast.keyword,
)  # fmt: skip
_GUARDED = {ast.Pow: "_power", ast.Mult: "_multiply", ast.Add: "_add", ast.LShift: "_lshift"}
_FOLD: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Pow: guards.power, ast.Mult: guards.multiply, ast.Add: guards.add,
    ast.LShift: guards.lshift, ast.Mod: guards.modulo, ast.Sub: operator.sub,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}  # fmt: skip
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
_CONVERSIONS = {ord("s"): "str", ord("r"): "repr", ord("a"): "ascii"}
_MAY_BE_FLOAT_CALLS = frozenset({"float", "abs", "min", "max", "round"})


class _Refused(Exception):
    """An expression breaks a rule; becomes a ConfigError naming the step."""


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
    rewriter = _Rewriter(meta)
    try:
        node = rewriter.visit(tree.body)
        if finite and _may_be_float(tree.body) and not isinstance(node, ast.Constant):
            node = _call("_finite", node)
        code = ast.unparse(ast.fix_missing_locations(node))
    except _Refused as exc:
        raise ConfigError(f"pipeline spec {where}: expression {source!r}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # too deeply nested to rewrite
        raise ConfigError(f"pipeline spec {where}: expression too complex: {exc}") from None
    return Translated(code, rewriter.uses_budget)


def _may_be_float(node: ast.expr) -> bool:
    """Whether a result could be an inf/NaN float (data from JSON never is)."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in _MAY_BE_FLOAT_CALLS
    return isinstance(node, ast.BinOp | ast.UnaryOp | ast.IfExp | ast.BoolOp)


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(name, ast.Load()), args=list(args), keywords=[])


def _number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


class _Rewriter(ast.NodeTransformer):
    """Checks each node against the rules while rewriting it to native code."""

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
        raise _Refused(f"{type(node).__name__} is not allowed")

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, str | bytes) and len(node.value) > MAX_STRING_LENGTH:
            raise _Refused(f"a literal longer than {MAX_STRING_LENGTH}")
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        name = node.id
        if name.startswith("__"):
            raise _Refused(f"name {name!r}: dunder names are not allowed")
        if name in self._bound:
            return ast.Name("c_" + name, ast.Load())
        if name in self._meta:
            return ast.parse(self._meta[name], mode="eval").body
        if name in FUNCTIONS:
            return ast.Name("F_" + name, ast.Load())
        return ast.Subscript(ast.Name("v", ast.Load()), ast.Constant(name), ast.Load())

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        raise _Refused(f"attribute access (.{node.attr}) is not allowed")

    def visit_Call(self, node: ast.Call) -> ast.expr:
        func = node.func
        if not isinstance(func, ast.Name) or func.id not in FUNCTIONS or func.id in self._bound:
            called = func.id if isinstance(func, ast.Name) else ast.unparse(func)
            raise _Refused(f"calling {called!r} is not allowed (allowed: {', '.join(FUNCTIONS)})")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise _Refused("*args/**kwargs in calls are not allowed")
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
            raise _Refused(f"operator {op.__name__} is not allowed")
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
            return native if _number(left) else _call("_modulo", left, right)
        guard = _GUARDED.get(op)
        if guard is None or _safe_native(op, left, right):
            return native
        guarded = _call(guard, left, right)
        constants_are_numbers = all(
            _number(n) for n in (left, right) if isinstance(n, ast.Constant)
        )
        if op in (ast.Mult, ast.Add) and _cheap(left) and _cheap(right) and constants_are_numbers:
            # Numbers cannot grow big here: skip the guard's call for them (the operands are
            # side-effect free lookups, so reading them twice changes nothing).
            tests = [_numeric(n) for n in (left, right) if not isinstance(n, ast.Constant)]
            return ast.IfExp(ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0],
                             native, guarded)  # fmt: skip
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
            value = _call("F_" + _CONVERSIONS[node.conversion], value)
        return ast.FormattedValue(_call("_format", value, spec), -1, None)

    def visit_ListComp(self, node: ast.ListComp) -> ast.expr:
        return self._comprehension(node, lambda gens: ast.ListComp(self.visit(node.elt), gens))

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.expr:
        return self._comprehension(node, lambda gens: ast.GeneratorExp(self.visit(node.elt), gens))

    def visit_DictComp(self, node: ast.DictComp) -> ast.expr:
        return self._comprehension(
            node, lambda gens: ast.DictComp(self.visit(node.key), self.visit(node.value), gens)
        )

    def _comprehension(
        self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, finish: Any
    ) -> ast.expr:
        """Loop variables become ``c_<name>`` locals; every iterable is charged to ``_b``."""
        self.uses_budget = True
        outer = set(self._bound)
        generators = []
        for gen in node.generators:
            if gen.is_async:
                raise _Refused("async comprehensions are not allowed")
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
                raise _Refused(f"name {node.id!r}: dunder names are not allowed")
            self._bound.add(node.id)
            return ast.Name("c_" + node.id, ast.Store())
        if isinstance(node, ast.Tuple | ast.List):
            return ast.Tuple([self._target(e) for e in node.elts], ast.Store())
        raise _Refused(f"comprehension target {ast.unparse(node)!r} is not allowed")


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
        raise _Refused(f"{ast.unparse(unfolded)} is {value}")
    if isinstance(value, int) and value.bit_length() > 1000:
        return unfolded  # within the limits, but too long a literal; computed per record
    return ast.Constant(value)


def _checked(compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except ExpressionLimit as exc:
        raise _Refused(f"over a limit: {exc}") from None
    except Exception as exc:  # e.g. 1/0: it would fail every record
        raise _Refused(f"{type(exc).__name__}: {exc}") from None


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
