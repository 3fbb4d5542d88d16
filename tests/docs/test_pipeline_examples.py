"""Every example of docs/pipelines.md, in each of its forms, does what its table says.

An example starts at a ``<!-- pipeline-example -->`` line: the ```yaml and ```python blocks
after it are its forms (a Python block defines ``pipeline``, with ``Pipeline`` and ``Record``
at hand), the Markdown table after them its records: ``key``, ``value`` and ``output``
(``<br>``-separated outputs, each a JSON value with ``key `k``` / ``to `topic``` when they
differ from the input key / ``output_topic``; ``dead letter `Class```; empty: nothing).

Each input record is a batch of its own, run as :meth:`app.engine.loop.Bridge._process` runs
a batch:
the fused path first when the pipeline has one, the steps for what it leaves; state in real
stores, committed after each batch. No broker: the shell blocks of the same page run the
example pipelines against one (tests/docs/test_doc_commands.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from app.pipeline import Pipeline, Record, Row, StepContext
from app.pipeline.spec import compile_spec
from app.pipeline.steps import fuse, reads_value
from app.serde import formats
from tests.support.state import LocalAccess

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipelines.md"
MARKER = "<!-- pipeline-example -->"
_FENCE = re.compile(r"^```(\w+)\s*$")
_TICKS = re.compile(r"`([^`]*)`")
SOURCE = ("_source_topic", "_source_partition", "_source_offset")
KAFKA_TIMESTAMP = 1_764_000_000_000  # every input record's, as the page says


@dataclass(slots=True, frozen=True)
class Example:
    line: int
    forms: tuple[tuple[str, str], ...]  # (yaml | python, source)
    rows: tuple[tuple[bytes | None, bytes, tuple[Any, ...]], ...]  # key, value, outputs


def examples(path: Path = DOC) -> list[Example]:
    """Every example of the page, in order."""
    lines = path.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    found = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        found.append(_example(lines[start:end], start + 1))
    return found


def _example(lines: list[str], line: int) -> Example:
    forms, table, i = [], [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence:
            j = lines.index("```", i + 1)
            forms.append((fence.group(1), "\n".join(lines[i + 1 : j]) + "\n"))
            i = j
        elif lines[i].startswith("|") and forms:
            table.append(lines[i])
        elif table:
            break
        i += 1
    head = [c.strip() for c in table[0].strip("|").split("|")]
    assert head == ["key", "value", "output"], f"docs/pipelines.md:{line}: table head {head}"
    rows = tuple(_row(r) for r in table[2:])
    assert forms and rows, f"docs/pipelines.md:{line}: an example needs a form and records"
    return Example(line, tuple(forms), rows)


def _row(line: str) -> tuple[bytes | None, bytes, tuple[Any, ...]]:
    key_cell, value_cell, out_cell = (c.strip() for c in line.strip().strip("|").split("|"))
    key = _TICKS.fullmatch(key_cell)
    value = _TICKS.fullmatch(value_cell)
    assert value is not None, line
    outputs = tuple(_output(o.strip()) for o in out_cell.split("<br>") if o.strip())
    return (key.group(1).encode() if key else None), value.group(1).encode(), outputs


def _output(cell: str) -> tuple[Any, ...]:
    """``("dead letter", class)`` or ``(value, key or None, topic or None)``."""
    ticks = _TICKS.findall(cell)
    if cell.startswith("dead letter"):
        return ("dead letter", ticks[0])
    words = dict(re.findall(r"(key|to) `([^`]*)`", cell))
    return (orjson.loads(ticks[0]), words.get("key"), words.get("to"))


# ---- running a form as the bridge does -----------------------------------------------------------


class Message:
    """A consumer message (what the fused path reads)."""

    def __init__(self, key: bytes | None, value: bytes, offset: int) -> None:
        self._key, self._value, self._offset = key, value, offset

    def error(self) -> None:
        return None

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> None:
        return None

    def topic(self) -> str:
        return "in"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, KAFKA_TIMESTAMP)


def build(kind: str, source: str) -> Pipeline:
    if kind == "yaml":
        return compile_spec(yaml.safe_load(source), "docs/pipelines.md")
    assert kind == "python", kind
    namespace: dict[str, Any] = {"Pipeline": Pipeline, "Record": Record}
    exec(compile(source, "docs/pipelines.md", "exec"), namespace)
    pipeline: Pipeline = namespace["pipeline"]
    return pipeline


def outcome(pipeline: Pipeline, key: bytes | None, value: bytes, offset: int, access: Any) -> Any:
    """What one input record (one batch) gives: the outputs as the table writes them."""
    fused = fuse(pipeline.steps, formats(), 1_000_000, lambda _topic: True, access)
    if fused is not None:
        produced: list[tuple[str, bytes, Any]] = []
        done, _ = fused(
            [Message(key, value, offset)],
            lambda topic, payload, k, *_placement: produced.append((topic, payload, k)),
            lambda *_: pytest.fail("no full queue here"),
            "out",
        )
        if done == 1:
            return tuple(_as_written(orjson.loads(p), k, t, key) for t, p, k in produced)
    decoded = orjson.loads(value) if reads_value(pipeline.steps) else value
    rows = [Row(decoded, key, None, "in", 0, offset, KAFKA_TIMESTAMP, value)]
    ctx = StepContext(retries=0, state=access)
    for step in pipeline.steps:
        rows = step(rows, ctx)
    dead = tuple(("dead letter", type(f.error).__name__) for f in ctx.failures)
    written = tuple(_as_written(r.value, _encoded(r.key), r.topic or "out", key) for r in rows)
    return dead + written


def _encoded(key: Any) -> bytes | None:
    return key if key is None or isinstance(key, bytes) else str(key).encode()


def _as_written(value: Any, key: bytes | None, topic: str, input_key: bytes | None) -> Any:
    value = {k: v for k, v in value.items() if k not in SOURCE} if type(value) is dict else value
    shown_key = None if key == input_key else (key or b"").decode()
    return (orjson.loads(orjson.dumps(value)), shown_key, None if topic == "out" else topic)


EXAMPLES = examples()
CASES = [
    pytest.param(e, kind, source, id=f"line{e.line}-{kind}")
    for e in EXAMPLES
    for kind, source in e.forms
]


@pytest.mark.parametrize(("example", "kind", "source"), CASES)
def test_each_form_of_each_example_gives_its_table(
    example: Example, kind: str, source: str, tmp_path: Path
) -> None:
    pipeline = build(kind, source)
    access = LocalAccess(tmp_path)
    try:
        for offset, (key, value, expected) in enumerate(example.rows):
            got = outcome(pipeline, key, value, offset, access)
            assert got == expected, f"docs/pipelines.md:{example.line} ({kind}), record {offset}"
            access.commit()
    finally:
        access.close()


def test_every_step_has_an_example_in_both_forms() -> None:
    steps = {"filter", "map", "set", "drop", "rename", "key_by", "route", "dedupe", "count", "sum",
             "window"}  # fmt: skip
    shown: dict[str, set[str]] = {}
    for example in EXAMPLES:
        for kind, source in example.forms:
            if kind == "yaml":
                for item in yaml.safe_load(source)["steps"]:
                    name = item if isinstance(item, str) else next(iter(item))
                    shown.setdefault(name, set()).update(k for k, _ in example.forms)
    assert {s for s in steps if shown.get(s) == {"yaml", "python"}} == steps


def test_the_table_reader_reads_what_the_page_means(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        f"{MARKER}\n```yaml\nsteps:\n  - key_by: user\n```\n\n| key | value | output |\n"
        "|---|---|---|\n"
        '| `a` | `{"user": "b"}` | `{"user": "b"}` key `b` to `t`<br>dead letter `KeyError` |\n'
        "| | `{}` | |\n"
    )
    (example,) = examples(page)
    assert example.forms == (("yaml", "steps:\n  - key_by: user\n"),)
    assert example.rows == (
        (b"a", b'{"user": "b"}', (({"user": "b"}, "b", "t"), ("dead letter", "KeyError"))),
        (None, b"{}", ()),
    )
