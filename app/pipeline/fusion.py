"""The fused fast path: one generated function per pipeline of stateless steps.

:func:`app.pipeline.steps.fuse` hands a pipeline of filters and dict maps (Python functions) or
of stateless spec steps (filter, map, set, drop, key_by, route) here. The steps are inlined, in
order, into the body of one loop over the batch of consumer messages that decodes, transforms,
encodes, checks the size and produces each record. For ``filter: "amount >= 5"`` and
``map: {id: id, cents: "int(amount * 100)"}`` the generated loop body reads::

    v = loads(m.value())
    k = m.key()
    if not v['amount'] >= 5:
        continue
    v = {'id': v['id'], 'cents': F_int(_multiply(v['amount'], 100))}

and a Python ``.filter(keep).map(enrich)`` becomes ``if not S_0(v): continue`` and
``v = S_1(v)``: each function is called from a call site of its own, with no loop over the
stages. No Row objects, no name dicts, no per-expression calls, no list of outputs: each record
is produced as soon as it is encoded.

The function stops at the first record that needs the general path: a message error, an
exception, a value that is not a dict (fan-out lists, strings...), NaN/inf from a Python map, an
integer beyond 64 bits, an output whose value + key + headers exceed ``max_bytes`` (a bound
safely below both ``max_output_bytes`` and the producer's ``message.max.bytes``), a route to no
existing topic. It returns how many messages it handled; the caller runs the rest, from that
record on, through the steps and :meth:`app.sink.output.Output.send`, which isolate and dead-letter
the record (``InvalidRoute``, ``UnknownRouteTopic``, ``OutputNotEncodable``...) exactly as
without the fused path. The records before it were handled exactly as the general path would
have handled them (``tests/unit/test_fused_path.py`` and ``test_spec_compiler.py`` check it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orjson import dumps, loads

from app.pipeline.encoding import encode_output_key, has_non_finite, header_bytes, null_in
from app.pipeline.expressions import MESSAGE_META, Translated, build, fields_code, translate

# produce(topic, value, key[, headers=...]): the producer's own method (KafkaException passes).
Produce = Callable[..., None]
# room(topic, value, key, headers): the local queue was full; produce once there is room.
Room = Callable[[str, bytes, Any, Any], None]
# run(messages, produce, room, default topic) -> (messages handled, records produced)
FusedBatch = Callable[[list[Any], Produce, Room, str], tuple[int, int]]


@dataclass(slots=True, frozen=True)
class SpecPart:
    """What a stateless step does, for the fused path to compile in line.

    ``kind`` is filter, map, set, drop, key_by or route (a spec step): ``arg`` is the
    expression source (filter, key_by, route), the field → expression mapping (map, set) or
    the dropped fields (drop). Or ``kind`` is call_filter or call_map (a Python step of
    ``Pipeline().filter(fn)`` / ``.map(fn)``): ``arg`` is the function.
    """

    kind: str
    arg: Any
    where: str


_HEAD = """\
def run(messages, produce, room, default):
    n = 0
    for i, m in enumerate(messages):
        try:
            if m.error() is not None:
                return i, n
            v = loads(m.value())
            k = m.key()
"""
_TAIL = """\
            payload = dumps(v)
            headers = m.headers()
            extra = header_bytes(headers) if headers else 0
            if len(payload) + (len(k) if k else 0) + extra > max_bytes:
                return i, n
        except Exception:  # any record error: the general path isolates it
            return i, n
        try:  # outside the guard above: a produce error is no record error
            if headers is None:
                produce(TOPIC, payload, k)
            else:
                produce(TOPIC, payload, k, headers=headers)
        except BufferError:
            room(TOPIC, payload, k, headers)
        n += 1
    return len(messages), n
"""
_INDENT = " " * 12
_BAIL = "return i, n"


def compile_parts(
    parts: list[SpecPart], max_bytes: int, topic_exists: Callable[[str], bool] | None = None
) -> FusedBatch | None:
    """One function for the whole batch (see the module docstring).

    Args:
        parts: the steps, in order.
        max_bytes: larger outputs leave the rest of the batch to the general path.
        topic_exists: whether a routed-to topic exists (the output's topic catalog); without
            it a pipeline that routes has no fused path (None is returned).
    """
    routes = any(p.kind == "route" for p in parts)
    if routes and topic_exists is None:
        return None
    body: list[str] = []
    budget = False
    names: dict[str, Any] = {}
    for i, part in enumerate(parts):
        lines, done = _lines(i, part, names)
        body += lines
        budget = budget or (done is not None and done.uses_budget)
    if budget:
        body.insert(0, "_b = _Budget()")
    if not parts or parts[-1].kind not in ("map", "set", "drop", "call_map"):
        # no step, or a filter or key_by last: the input value may not be an object
        body.append(f"if type(v) is not dict:\n{_INDENT}    {_BAIL}")
    if any(p.kind == "key_by" for p in parts):
        body.append("k = _key(k)")
    if routes:  # the last route wins, as on the Row path; bad routes are dead-lettered there
        body.insert(0, "t = None")
        body.append("if t is not None and (type(t) is not F_str or not t or not topic_exists(t)):")
        body.append(f"    {_BAIL}")
    tail = _TAIL.replace("TOPIC", "t or default" if routes else "default")
    if any(p.kind == "call_map" for p in parts):  # NaN/inf is written as null: refused there
        tail = tail.replace(
            "            headers = m.headers()\n",
            f"            if null_in(payload) and has_non_finite(v):\n{_INDENT}    {_BAIL}\n"
            "            headers = m.headers()\n",
        )
    source = _HEAD + "".join(_INDENT + line + "\n" for line in body) + tail
    names.update(loads=loads, dumps=dumps, max_bytes=max_bytes, _key=encode_output_key)
    names.update(topic_exists=topic_exists, header_bytes=header_bytes)
    names.update(
        has_non_finite=has_non_finite,
        null_in=null_in,
        enumerate=enumerate,
        len=len,
        BufferError=BufferError,
    )
    run: FusedBatch = build(source, "run", "steps (fused)", names)
    return run


def _lines(i: int, part: SpecPart, names: dict[str, Any]) -> tuple[list[str], Translated | None]:
    """The loop-body lines of one step (and its translation, for the comprehension budget)."""
    if part.kind == "call_filter":
        names[f"S_{i}"] = part.arg
        return [f"if not S_{i}(v):", "    continue"], None
    if part.kind == "call_map":  # None drops the record; a non-dict result: the general path
        names[f"S_{i}"] = part.arg
        return [f"v = S_{i}(v)", "if v is None:", "    continue", "if type(v) is not dict:",
                f"    {_BAIL}"], None  # fmt: skip
    if part.kind == "drop":
        names[f"D_{i}"] = part.arg
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
