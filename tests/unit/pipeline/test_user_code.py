"""User code cannot take the process down: whatever a step raises (an exception whose
``__str__`` raises, ``SystemExit``, ``GeneratorExit``, ``KeyboardInterrupt``) is its record's
dead letter with the exception's class; a module that exits or raises at import is one line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest

from app.errors import ConfigError
from app.pipeline import Pipeline, Row, StepContext, load_pipeline
from app.sink.collector import RecordCollector
from app.sink.output import H_CLASS, H_MESSAGE, Output


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _exit(_v: Any) -> NoReturn:
    sys.exit(3)


def _generator_exit(_v: Any) -> NoReturn:
    raise GeneratorExit


def _interrupt(_v: Any) -> NoReturn:
    raise KeyboardInterrupt


def _unprintable(_v: Any) -> NoReturn:
    raise Unprintable


RAISES = {
    "SystemExit": _exit,
    "GeneratorExit": _generator_exit,
    "KeyboardInterrupt": _interrupt,
    "Unprintable": _unprintable,
}


def rows(n: int) -> list[Row]:
    return [Row({"n": i}, None, None, "in", 0, i, 1000 + i, b"raw") for i in range(n)]


def poisoned(fn: Any) -> Any:
    return lambda v: fn(v) if v["n"] == 1 else v


@pytest.mark.parametrize("kind", ["map", "filter", "key_by", "route"])
@pytest.mark.parametrize("cls", list(RAISES))
def test_whatever_a_step_raises_fails_only_its_record(kind: str, cls: str) -> None:
    p = getattr(Pipeline(), kind)(poisoned(RAISES[cls]))
    ctx = StepContext(retries=1)
    batch = rows(3)
    for step in p.steps:
        batch = step(batch, ctx)
    assert [r.offset for r in batch] == [0, 2]
    assert [(f.row.offset, type(f.error).__name__) for f in ctx.failures] == [(1, cls)]


class Recorder:
    def __init__(self) -> None:
        self.letters: list[Any] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, *a: Any, **kw: Any) -> None:
        self.letters.append((topic, kw.get("headers") or (a[-1] if a else None)))

    def poll(self, _timeout: float = 0) -> int:
        return 0


def test_an_exception_whose_str_raises_is_a_dead_letter_with_its_class() -> None:
    ctx = StepContext(retries=0)
    Pipeline().map(_unprintable).steps[0](rows(1), ctx)
    producer = Recorder()
    out = Output(RecordCollector(producer), "out", "out.dlq", 10_000, {"out"}.__contains__)
    out.dead_letter(ctx.failures[0])
    [(topic, headers)] = producer.letters
    assert topic == "out.dlq"
    found = dict(headers)
    assert found[H_CLASS] == b"Unprintable"
    assert b"str() of Unprintable raised RuntimeError" in found[H_MESSAGE]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("import sys\nsys.exit(0)\n", "raised SystemExit"),
        ("raise SystemExit('bye')\n", "raised SystemExit"),
        ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt"),
        ("class E(Exception):\n    def __str__(self):\n        raise ValueError\nraise E\n", "E"),
    ],
)
def test_a_module_that_exits_or_raises_at_import_is_one_line(
    body: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"exits_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as info:
        load_pipeline(f"{name}:pipeline")
    text = str(info.value)
    assert "\n" not in text
    assert f"pipeline '{name}:pipeline': importing it" in text
    assert said in text
