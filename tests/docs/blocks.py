"""Shell blocks of the Markdown docs, with the ``doc-test`` markers that say how to run them.

A block is a fenced ```bash, ```sh or ```console block (in ``console`` blocks only the lines
starting with ``$ `` are commands; the rest is output). An HTML comment on the line before the
block changes how the doc test runs it::

    <!-- doc-test: background -->       a long-running command (the bridge): started in the
                                         background, the next blocks run while it runs
    <!-- doc-test: ctrl-c -->           first Ctrl-C (SIGINT) every background command of the
                                         document and require exit code 0, as a user would
    <!-- doc-test: ctrl-c background --> both, in that order
    <!-- doc-test: skip REASON -->       not run; the test reports it skipped with REASON
    <!-- doc-test: timeout=SECONDS -->   a block allowed longer than the default (a Spark job
                                         starts a JVM); combines with the words above
    <!-- doc-test: own-broker -->       the block starts and stops a broker of its own: the
                                         document's broker is not started for it

Skips are for what this machine cannot do (a Kubernetes cluster) or what another test runs
already; each names its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(bash|sh|console)\s*$")
_MARKER = re.compile(r"^<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
_WORDS = {"background", "ctrl-c", "own-broker"}
_TIMEOUT = re.compile(r"^timeout=[1-9]\d*$")


@dataclass(slots=True, frozen=True)
class Block:
    """One shell block: where it is, its commands and its markers."""

    path: Path
    line: int  # 1-based line of the opening fence
    script: str
    background: bool = False
    ctrl_c: bool = False
    skip: str | None = None  # the reason, when marked skip
    timeout: float | None = None  # seconds, when marked timeout=N
    own_broker: bool = False  # needs no broker of the document's

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def extract(path: Path) -> list[Block]:
    """Every shell block of a Markdown file, in order."""
    lines = path.read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if fence.group(1) == "console":
            body = [line[2:] for line in body if line.startswith("$ ")]
        marker = _MARKER.match(lines[start - 1]) if start else None
        blocks.append(_block(path, start + 1, "\n".join(body) + "\n", marker))
        i += 1
    return blocks


def _block(path: Path, line: int, script: str, marker: re.Match[str] | None) -> Block:
    if marker is None:
        return Block(path, line, script)
    body = marker.group("body")
    if body.startswith("skip"):
        reason = body.removeprefix("skip").strip()
        if not reason:
            raise ValueError(f"{path.name}:{line}: a doc-test skip needs a reason")
        return Block(path, line, script, skip=reason)
    words = set(body.split())
    timeouts = {w for w in words if _TIMEOUT.match(w)}
    words -= timeouts
    if not words <= _WORDS or len(timeouts) > 1:
        raise ValueError(f"{path.name}:{line}: unknown doc-test marker words {words - _WORDS}")
    timeout = float(timeouts.pop().split("=")[1]) if timeouts else None
    return Block(
        path, line, script, "background" in words, "ctrl-c" in words, timeout=timeout,
        own_broker="own-broker" in words,
    )  # fmt: skip
