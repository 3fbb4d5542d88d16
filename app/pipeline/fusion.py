"""The fused fast path of a declarative spec: one generated function per pipeline.

:func:`app.pipeline.steps.fuse` hands a pipeline made only of stateless spec steps (filter,
map, set, drop, key_by, route) here. Their expressions are translated again against the consumer
message (:data:`~app.pipeline.expressions.MESSAGE_META`) and inlined, in order, into the body of
one loop over the batch, which does what ``steps.fuse`` does for Python functions: decode,
transform, encode, check sizes. For ``filter: "amount >= 5"`` and
``map: {id: id, cents: "int(amount * 100)"}`` the generated loop body reads::

    v = loads(m.value())
    k = m.key()
    if not v['amount'] >= 5:
        continue
    v = {'id': v['id'], 'cents': F_int(_multiply(v['amount'], 100))}

No Row objects, no name dicts, no per-expression calls. Like ``steps.fuse``, the function
returns None on anything unusual (an exception, a value that is not a dict, a large record, a
route to no existing topic); the caller then runs the batch through the steps and
:meth:`app.output.Output.send`, which isolate and dead-letter the record (``InvalidRoute``,
``UnknownRouteTopic``) exactly as without the fused path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orjson import dumps, loads

from app.pipeline.encoding import encode_output_key, header_bytes
from app.pipeline.expressions import MESSAGE_META, Translated, build, fields_code, translate

Encoded = tuple[bytes, Any, Any, str | None]  # value bytes, key, headers, topic (None: default)
FusedBatch = Callable[[list[Any]], list[Encoded] | None]


@dataclass(slots=True, frozen=True)
class SpecPart:
    """What a stateless spec step does, for the fused path to compile in line.

    ``kind`` is filter, map, set, drop, key_by or route; ``arg`` the expression source (filter,
    key_by, route), the field → expression mapping (map, set) or the dropped fields (drop).
    """

    kind: str
    arg: Any
    where: str


_HEAD = """\
def run(messages):
    out = []
    append = out.append
    try:
        for m in messages:
            if m.error() is not None:
                return None
            v = loads(m.value())
            k = m.key()
"""
_TAIL = """\
            payload = dumps(v)
            headers = m.headers()
            extra = header_bytes(headers) if headers else 0
            if len(payload) + (len(k) if k else 0) + extra > max_bytes:
                return None
            append((payload, k, headers, TOPIC))
    except Exception:  # any record error: the general path isolates it
        return None
    return out
"""
_INDENT = " " * 12


def fuse_spec(
    parts: list[SpecPart], max_bytes: int, topic_exists: Callable[[str], bool] | None = None
) -> FusedBatch | None:
    """One function for the whole batch.

    Args:
        parts: the steps, in order.
        max_bytes: larger outputs leave the batch to the general path.
        topic_exists: whether a routed-to topic exists (the output's topic catalog); without
            it a pipeline that routes has no fused path (None is returned).
    """
    routes = any(p.kind == "route" for p in parts)
    if routes and topic_exists is None:
        return None
    body: list[str] = []
    budget = False
    drops: dict[str, frozenset[str]] = {}
    for i, part in enumerate(parts):
        lines, done = _lines(i, part, drops)
        body += lines
        budget = budget or (done is not None and done.uses_budget)
    if budget:
        body.insert(0, "_b = _Budget()")
    ends_dict = parts[-1].kind in ("map", "set", "drop")
    if not ends_dict:  # a filter or key_by last: the input value may not be an object
        body.append("if type(v) is not dict:\n" + _INDENT + "    return None")
    if any(p.kind == "key_by" for p in parts):
        body.append("k = _key(k)")
    if routes:  # the last route wins, as on the Row path; bad routes are dead-lettered there
        body.insert(0, "t = None")
        body.append("if t is not None and (type(t) is not F_str or not t or not topic_exists(t)):")
        body.append("    return None")
    tail = _TAIL.replace("TOPIC", "t" if routes else "None")
    source = _HEAD + "".join(_INDENT + line + "\n" for line in body) + tail
    names = {"loads": loads, "dumps": dumps, "max_bytes": max_bytes, "_key": encode_output_key}
    names["topic_exists"] = topic_exists
    names.update(header_bytes=header_bytes, **drops)
    run: FusedBatch = build(source, "run", "steps (fused)", names)
    return run


def _lines(
    i: int, part: SpecPart, drops: dict[str, frozenset[str]]
) -> tuple[list[str], Translated | None]:
    """The loop-body lines of one step (and its translation, for the comprehension budget)."""
    if part.kind == "drop":
        drops[f"D_{i}"] = part.arg
        return [f"v = {{f: x for f, x in v.items() if f not in D_{i}}}"], None
    if part.kind in ("map", "set"):
        done = fields_code(part.arg, part.where, MESSAGE_META, keep=part.kind == "set")
        return [f"v = {done.code}"], done
    done = translate(part.arg, part.where, MESSAGE_META, finite=part.kind != "filter")
    if part.kind == "filter":
        return [f"if not ({done.code}):", "    continue"], done
    if part.kind == "route":
        return [f"t = {done.code}"], done
    return [f"k = {done.code}"], done  # key_by
