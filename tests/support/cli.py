"""Run ``eos-bridge`` sub-commands as a user does: a subprocess, a clean BRIDGE_* environment;
or in this process (``eos_bridge_here``) where the process boundary is not what a test proves."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

# Not passed on to the bridge: its settings come from the test, and a test machine that is a
# Kubernetes pod does not make the bridge's scale-in check look for a StatefulSet (that check
# is tested against tests/support/kube.py).
HERMETIC = ("BRIDGE_", "KUBERNETES_")

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
    base = {k: v for k, v in os.environ.items() if not k.startswith(HERMETIC)}
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


def eos_bridge_here(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> Result:
    """``eos_bridge`` without the subprocess: ``main(ARGS)`` in this process, with only the given
    BRIDGE_* variables, stdout and stderr captured, and what the command changes in the process
    (root logger, signal handlers, modules imported from ``env["PYTHONPATH"]``) put back."""
    from app.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (
        _environment(env or {}),
        _process_state(),
        mock.patch.object(sys, "stdin", io.StringIO(stdin or "")),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(args))
        except SystemExit as done:  # argparse: usage errors and --help/--version
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return Result(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """os.environ without BRIDGE_* plus ``env``; its PYTHONPATH on sys.path, and the modules
    imported from there forgotten afterwards (the next test writes its own)."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    with mock.patch.dict(os.environ), mock.patch.object(sys, "path", [*paths, *sys.path]):
        for name in [k for k in os.environ if k.startswith("BRIDGE_")]:
            del os.environ[name]
        os.environ.update(env)
        try:
            yield
        finally:
            for name, module in list(sys.modules.items()):
                where = getattr(module, "__file__", None) or ""
                if any(where.startswith(p) for p in paths):
                    del sys.modules[name]


@contextlib.contextmanager
def _process_state() -> Iterator[None]:
    """Put back the root logger (``run`` sets up its own), SIGTERM/SIGINT and the wakeup fd."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    signals = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        signal.set_wakeup_fd(-1)
        for sig, handler in signals.items():
            signal.signal(sig, handler)
