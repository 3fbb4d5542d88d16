"""The example pipeline package and its Dockerfile: they load, build a wheel, and agree.

Building the example image itself would take minutes (tests/deploy/test_image.py builds the
bridge's); this checks what can go wrong without a build: the file names the Dockerfile copies
exist, the package declares the module the image's BRIDGE_PIPELINE names, and the image is left
running as the bridge's non-root user.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from app.pipeline import Row, StepContext, load_pipeline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipelines"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    pairs = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            pairs.append((word.upper(), rest.strip()))
    return pairs


def test_the_example_pipeline_sees_whole_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    pipeline = load_pipeline("payments_pipeline:pipeline")
    batch = [
        Row({"id": 1, "user": "ana", "amount": 1.5, "kind": "card"}, b"ana", None, "p", 1, 7, 99),
        Row({"id": 2, "user": "bo", "amount": 2.0, "kind": "refund"}, b"bo", None, "p", 0, 3, 99),
    ]
    ctx = StepContext()
    for step in pipeline.steps:
        batch = step(batch, ctx)
    assert [(r.key, r.value["cents"], r.value["source"]) for r in batch] == [("ana", 150, "p/1@7")]
    assert ctx.failures == []


def test_the_dockerfile_installs_the_module_it_names() -> None:
    steps = instructions(EXAMPLE / "Dockerfile")
    froms = [args for word, args in steps if word == "FROM"]
    assert froms == ["${BRIDGE_IMAGE}"]
    copied = next(args for word, args in steps if word == "COPY").split()
    sources = [a for a in copied[:-1] if not a.startswith("--")]
    assert all((EXAMPLE / s).is_file() for s in sources), sources
    assert [args for word, args in steps if word == "USER"][-1] == "10001:10001"
    env = next(args for word, args in steps if word == "ENV")
    module = env.removeprefix("BRIDGE_PIPELINE=").split(":")[0]

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["py-modules"] == [module]
    assert (EXAMPLE / f"{module}.py").is_file()
