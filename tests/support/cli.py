"""Run ``eos-bridge`` sub-commands as a user does: a subprocess, a clean BRIDGE_* environment."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[2]


@dataclass(slots=True, frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def one_line_error(self) -> str:
        """The single stderr line of a user mistake; fails when there is more or a traceback."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert "Traceback" not in self.stderr, self.stderr
        assert len(lines) == 1, f"expected one line on stderr, got:\n{self.stderr}"
        return lines[0]


def eos_bridge(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 120
) -> Result:
    """``python -m app ARGS`` from the repository, with only the given BRIDGE_* variables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BRIDGE_")}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), base.get("PYTHONPATH", "")]).rstrip(":")
    done = subprocess.run(
        [sys.executable, "-m", "app", *args],
        env={**base, **(env or {})}, cwd=REPO, input=stdin, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    return Result(done.returncode, done.stdout, done.stderr)


def help_text(*args: str) -> str:
    """What ``eos-bridge ARGS --help`` prints, from this process's parser at 80 columns (a
    subprocess per command costs a second of imports; ``eos_bridge`` tests the process)."""
    from app.commands.cli import build_parser

    out = io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": "80"}), contextlib.redirect_stdout(out):
        try:
            build_parser().parse_args([*args, "--help"])
        except SystemExit as done:
            assert done.code == 0, f"{args} --help exited {done.code}"
    return out.getvalue()
