"""Run-time guards of compiled spec expressions: bounded CPU and memory per evaluation.

The expression compiler (:mod:`app.pipeline.expressions`) emits a call to one of these in place
of each operator that can build a huge object from small operands (``**``, ``*``, ``<<``,
``+``, ``%`` on strings, f-string widths). Each checks the *size of the result* before building
it, in a few comparisons, and raises :class:`~app.errors.ExpressionLimit` (a record error: the
record is dead-lettered) instead of burning seconds of CPU or gigabytes of memory.

The limits are simpleeval's (``MAX_STRING_LENGTH``, ``MAX_COMPREHENSION_LENGTH``, ``MAX_SHIFT``)
plus a bound on the size of an integer power, which simpleeval bounds by its operands only
(``4000000 ** 4000000`` passes its check and runs for half a minute).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from simpleeval import MAX_COMPREHENSION_LENGTH, MAX_SHIFT, MAX_STRING_LENGTH

from app.errors import ExpressionLimit

MAX_LENGTH: int = MAX_STRING_LENGTH  # longest str/bytes/list an operator may build
MAX_ITEMS: int = MAX_COMPREHENSION_LENGTH  # comprehension iterations per evaluation
MAX_INT_BITS = 100_000  # largest integer power (bits); ~30,000 decimal digits
MAX_SHIFT_BITS: int = MAX_SHIFT
MAX_KEPT = 10 * MAX_STRING_LENGTH  # what comprehensions may keep per evaluation (see Budget)

_SIZED = (str, bytes, list, tuple)
_DIGITS = re.compile(rb"\d+")


def power(a: Any, b: Any) -> Any:
    """``a ** b``, refused when an integer result would exceed :data:`MAX_INT_BITS`."""
    if type(b) is int and b > 0 and type(a) is int and b * a.bit_length() > MAX_INT_BITS:
        raise ExpressionLimit(f"{a} ** {b} would exceed {MAX_INT_BITS} bits")
    return a**b


def multiply(a: Any, b: Any) -> Any:
    """``a * b``, refused when repeating a str/bytes/list/tuple beyond :data:`MAX_LENGTH`."""
    if isinstance(a, _SIZED):
        check_repeat(a, b)
    elif isinstance(b, _SIZED):
        check_repeat(b, a)
    return a * b


def check_repeat(seq: Any, times: Any) -> None:
    """Refuse ``seq * times`` longer than :data:`MAX_LENGTH`."""
    if isinstance(times, int) and times * len(seq) > MAX_LENGTH:
        raise ExpressionLimit(
            f"repeating a {type(seq).__name__} {times} times exceeds {MAX_LENGTH}"
        )


def add(a: Any, b: Any) -> Any:
    """``a + b``, refused when concatenating beyond :data:`MAX_LENGTH` (simpleeval's rule)."""
    if isinstance(a, _SIZED) and isinstance(b, _SIZED) and len(a) + len(b) > MAX_LENGTH:
        raise ExpressionLimit(f"concatenation longer than {MAX_LENGTH}")
    return a + b


def lshift(a: Any, b: Any) -> Any:
    """``a << b``, refused for shifts over :data:`MAX_SHIFT_BITS`."""
    if isinstance(b, int) and b > MAX_SHIFT_BITS:
        raise ExpressionLimit(f"{a} << {b}: shift over {MAX_SHIFT_BITS}")
    return a << b


def modulo(a: Any, b: Any) -> Any:
    """``a % b``; for printf-style formatting, refuses widths/precisions over the limit."""
    if isinstance(a, str | bytes):
        check_format(a if isinstance(a, bytes) else a.encode())
    return a % b


def format_value(value: Any, spec: str) -> str:
    """``format(value, spec)`` as an f-string ``{value:spec}`` does, with bounded widths."""
    check_format(spec.encode())
    return format(value, spec)


def check_format(template: bytes) -> None:
    """Refuse a printf/format-spec template whose widths or precisions exceed the limit."""
    # A width or precision is the only way a format builds more than its inputs; '*' takes
    # it from the arguments, where it cannot be checked before formatting.
    if b"*" in template and b"%" in template:
        raise ExpressionLimit("'*' widths are not allowed in expressions")
    for digits in _DIGITS.findall(template):
        if len(digits) > 6 or int(digits) > MAX_LENGTH:
            raise ExpressionLimit(f"format width/precision over {MAX_LENGTH}")


def finite(result: Any) -> Any:
    """``result``, unless it is an infinite or NaN float (JSON cannot carry those)."""
    if type(result) is float and not math.isfinite(result):
        raise ExpressionLimit(f"expression result is {result} (overflow or invalid operation)")
    return result


class Budget:
    """What one evaluation's comprehensions may still do: iterations (nested loops multiply)
    and the size of the elements they keep (each may be as large as the limits above)."""

    __slots__ = ("kept", "left")

    def __init__(self) -> None:
        self.left = MAX_ITEMS
        self.kept = MAX_KEPT

    def each(self, items: Iterable[Any]) -> Iterator[Any]:
        """``items``, charging one iteration per element."""
        for item in items:
            self.left -= 1
            if self.left < 0:
                raise ExpressionLimit(f"comprehensions over {MAX_ITEMS} iterations")
            yield item

    def keep(self, element: Any) -> Any:
        """``element``, charging its size (strings: characters; containers: items, nested
        ones included) to what the comprehension may keep."""
        pending = [element]
        while pending:
            item = pending.pop()
            if isinstance(item, str | bytes):
                self.kept -= len(item)
            elif isinstance(item, list | tuple | set | frozenset):
                self.kept -= len(item)
                pending.extend(item)
            elif isinstance(item, dict):
                self.kept -= len(item)
                pending.extend(item.keys())
                pending.extend(item.values())
            else:
                self.kept -= 1
            if self.kept < 0:  # checked as we go: the walk is bounded by the budget too
                raise ExpressionLimit(f"comprehension results over {MAX_KEPT} items/characters")
        return element


# The names compiled code refers to (module globals of every compiled function).
RUNTIME: dict[str, Any] = {
    "_power": power,
    "_multiply": multiply,
    "_add": add,
    "_lshift": lshift,
    "_modulo": modulo,
    "_format": format_value,
    "_finite": finite,
    "_Budget": Budget,
    "_NUMERIC": frozenset({int, float}),
}
