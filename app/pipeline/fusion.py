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
stages; a function that is one ``return <expression>`` is inlined instead
(:mod:`app.pipeline.inline`): ``if not (v['amount'] >= 5.0): continue``.
No Row objects, no name dicts, no per-expression calls, no list of outputs: each record
is produced as soon as it is encoded.

Values are decoded and encoded through the codecs of :class:`app.serde.Formats` (for JSON, its
``loads`` and ``dumps`` called by name: :class:`app.serde.Inline`); the produce tail is
:func:`fused_loop`'s, shared with the fused count (:mod:`app.pipeline.stateful.keyed`).

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
from typing import Any, Protocol

from app.kafka.ports import Produce, Room
from app.pipeline.expressions import MESSAGE_META, Translated, build, fields_code, translate
from app.pipeline.inline import finite_by_construction, inline
from app.pipeline.record import header_bytes
from app.serde import Formats
from app.serde import formats as default_formats
from app.serde.json import has_non_finite, null_in, rewritten


class FusedBatch(Protocol):
    """``run(messages, produce, room, default topic, keep partition)`` → (messages handled,
    records produced). ``keep``: a record the pipeline does not route goes to its input
    partition (``keep_partition``); every record keeps its input's timestamp."""

    def __call__(
        self, messages: list[Any], produce: Produce, room: Room, default: str, keep: bool = False
    ) -> tuple[int, int]: ...


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


_INDENT = " " * 12
# A record the pipeline does not route keeps its input partition with keep_partition.
_PARTITION = "m.partition() if keep else -1"
_ROUTED_PARTITION = "-1 if t or not keep else m.partition()"
_BAIL = "return i, n"
_LOOP = """\
def run(messages, produce, room, default, keep=False):
    n = 0
{prologue}
    try:
        for i, m in enumerate(messages):
            try:
                if m.error() is not None:
                    return i, n
{body}
                payload = {encode}
{checks}
                headers = m.headers()
                extra = header_bytes(headers) if headers else 0
                if {size} + (len(k) if k else 0) + extra > max_bytes:
                    return i, n
{accept}
            except BaseException:  # any record error: the general path isolates it
                return i, n
            p, ts = {partition}, m.timestamp()[1]
            try:  # outside the guard above: a produce error is no record error
                if headers is None:  # positional: cheaper than keywords
                    produce({topic}, payload, k, p, None, None, ts)
                else:
                    produce({topic}, payload, k, p, None, None, ts, headers)
            except BufferError:
                room({topic}, payload, k, headers, p, ts)
            n += 1
        return len(messages), n
    finally:
{epilogue}
"""


def fused_loop(
    body: list[str],
    *,
    where: str,
    names: dict[str, Any],
    max_bytes: int,
    formats: Formats,
    topic: str = "default",
    partition: str = _PARTITION,
    prologue: tuple[str, ...] = (),
    accept: tuple[str, ...] = (),
    epilogue: tuple[str, ...] = (),
    check_nan: bool = False,
    encode: str | None = None,
    input_numbers: bool = True,
) -> FusedBatch:
    """The one fused loop: decode-free ``body`` lines (they start from ``m``, leave the value in
    ``v`` and the key in ``k``), then encode, size check, ``accept`` lines and produce: the
    produce tail every fused path shares (``partition``: the expression of the record's
    partition, -1 for the partitioner's choice). ``epilogue`` runs however the loop ends (a
    stateful step stores what it counted there). ``check_nan``: the body may make NaN/inf,
    which a JSON encoder would write as null. ``encode``: the payload's expression instead of
    the codec's (it may be None: a tombstone). ``input_numbers``: the output may carry numbers
    of the input, so one that orjson rewrote is looked for (:func:`app.serde.json.rewritten`)."""
    checks = ""
    inline_out = formats.value_out.inline
    if input_numbers and inline_out is not None and inline_out.json and encode is None:
        # a decoded integer beyond 64 bits (a float now): the general path refuses it
        checks = f"{_INDENT}    if payload.find(b'+') >= 0 and rewritten(payload, v, m.value()):\n"
        checks += f"{_INDENT}        {_BAIL}\n"
    if check_nan and inline_out is not None and inline_out.json:
        checks += (
            f"{_INDENT}    if null_in(payload) and has_non_finite(v):\n{_INDENT}        {_BAIL}"
        )
    indent = _INDENT + "    "
    source = _LOOP.format(
        prologue="\n".join("    " + line for line in prologue),
        body="\n".join(indent + line for line in body),
        encode=encode or _encode_expr(formats, topic),
        size="len(payload)" if encode is None else "(len(payload) if payload is not None else 0)",
        checks=checks,
        accept="\n".join(indent + line for line in accept),
        topic=topic,
        partition=partition,
        epilogue="\n".join("        " + line for line in epilogue) or "        pass",
    )
    source = "\n".join(line for line in source.split("\n") if line.strip()) + "\n"
    scope = dict(names)
    scope.update(_codec_names(formats))
    scope.update(max_bytes=max_bytes, header_bytes=header_bytes, has_non_finite=has_non_finite)
    scope.update(null_in=null_in, enumerate=enumerate, len=len, BufferError=BufferError)
    scope.update(rewritten=rewritten)
    scope.update(Exception=Exception, BaseException=BaseException)
    run: FusedBatch = build(source, "run", where, scope)
    return run


def _codec_names(formats: Formats) -> dict[str, Any]:
    """What the generated code calls: loads/dumps when inlined, decode/encode otherwise."""
    inline_in, inline_out = formats.value_in.inline, formats.value_out.inline
    return {
        "loads": inline_in.loads if inline_in else None,
        "decode": formats.value_in.decode,
        "dumps": inline_out.dumps if inline_out else None,
        "encode": formats.value_out.encode,
        "_key": formats.key_out.encode,
    }


def _decode_expr(formats: Formats) -> str:
    return "loads(m.value())" if formats.value_in.inline else "decode(m.value(), m.topic())"


def _encode_expr(formats: Formats, topic: str) -> str:
    inline = formats.value_out.inline
    if inline is None:
        return f"encode(v, {topic})"
    if inline.per_topic and topic != "default":  # routed: dumps writes the output topic's ID
        return f"(dumps(v) if ({topic}) == default else encode(v, {topic}))"
    return "dumps(v)"


def compile_passthrough(max_bytes: int, formats: Formats) -> FusedBatch:
    """No step, bytes in and out: each record copied as it is, tombstones included
    (MirrorMaker's copy; its partition and timestamp as :func:`fused_loop` says)."""
    return fused_loop(
        ["v = m.value()", "k = m.key()"],
        where="passthrough (fused)",
        names={},
        max_bytes=max_bytes,
        formats=formats,
        encode="v",
    )


def compile_verbatim(max_bytes: int, formats: Formats) -> FusedBatch:
    """No step, JSON in and out: each record checked to be JSON and written as it is, not
    re-encoded (an integer beyond 64 bits, spacing and key order stay; see
    :func:`app.serde.json.verbatim` for the general path's)."""
    return fused_loop(
        ["loads(m.value())", "k = m.key()", "v = m.value()"],
        where="passthrough (fused)",
        names={},
        max_bytes=max_bytes,
        formats=formats,
        encode="v",
    )


def compile_parts(
    parts: list[SpecPart],
    max_bytes: int,
    topic_exists: Callable[[str], bool] | None = None,
    formats: Formats | None = None,
) -> FusedBatch | None:
    """One function for the whole batch (see the module docstring).

    Args:
        parts: the steps, in order.
        max_bytes: larger outputs leave the rest of the batch to the general path.
        topic_exists: whether a routed-to topic exists (the output's topic catalog); without
            it a pipeline that routes has no fused path (None is returned).
        formats: the codecs (JSON values, bytes keys when not given).
    """
    formats = formats or default_formats()
    routes = any(p.kind == "route" for p in parts)
    if routes and topic_exists is None:
        return None
    body: list[str] = [f"v = {_decode_expr(formats)}", "k = m.key()"]
    budget = False
    names: dict[str, Any] = {"topic_exists": topic_exists}
    for i, part in enumerate(parts):
        lines, done = _lines(i, part, names)
        body += lines
        budget = budget or (done is not None and done.uses_budget)
    if budget:
        body.insert(2, "_b = _Budget()")
    if routes:
        body.insert(2, "t = None")
    if not parts or parts[-1].kind not in ("map", "set", "drop", "call_map"):
        # no step, or a filter or key_by last: the input value may not be an object
        body += ["if type(v) is not dict:", f"    {_BAIL}"]
    topic = "t or default" if routes else "default"
    if routes:  # the last route wins, as on the Row path; bad routes are dead-lettered there
        body.append("if t is not None and (type(t) is not F_str or not t or not topic_exists(t)):")
        body.append(f"    {_BAIL}")
    if any(p.kind == "key_by" for p in parts):
        body.append(f"k = _key(k, {topic})")
    return fused_loop(
        body,
        where="steps (fused)",
        names=names,
        max_bytes=max_bytes,
        formats=formats,
        topic=topic,
        check_nan=_may_make_non_finite(parts, formats),
        partition=_ROUTED_PARTITION if routes else _PARTITION,
    )


def _may_make_non_finite(parts: list[SpecPart], formats: Formats) -> bool:
    """Whether a Python map may put NaN/inf in the value (the encoder would write null): any
    called map; an inlined one only if it computes floats or its input is not orjson's (which
    never decodes NaN/inf)."""
    inline_in = formats.value_in.inline
    json_in = inline_in is not None and inline_in.json
    for p in parts:
        if p.kind == "call_map":
            done = inline(p.arg)
            if done is None or not json_in or not finite_by_construction(done.tree):
                return True
    return False


def _lines(i: int, part: SpecPart, names: dict[str, Any]) -> tuple[list[str], Translated | None]:
    """The loop-body lines of one step (and its translation, for the comprehension budget).
    A Python step whose function is one expression is inlined (:mod:`app.pipeline.inline`)."""
    if part.kind in ("call_filter", "call_map"):
        inlined = inline(part.arg)
        if inlined is None:
            names[f"S_{i}"] = part.arg
            call = f"S_{i}(v)"
        else:
            names.update(inlined.names)
            call = inlined.code
        if part.kind == "call_filter":
            return [f"if not {call}:", "    continue"], None
        # None drops the record; a non-dict result: the general path
        return [
            f"v = {call}",
            "if v is None:",
            "    continue",
            "if type(v) is not dict:",
            f"    {_BAIL}",
        ], None
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
