"""Paths and small helpers shared by the deployment tests."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "eos-bridge"
RELEASE = "demo"
NAMESPACE = "streaming"

Manifest = dict[str, Any]


class HelmError(Exception):
    """helm exited non-zero; the message is its stderr."""


def run_helm(helm_bin: str, args: Sequence[str]) -> str:
    result = subprocess.run(
        [helm_bin, *args], capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        raise HelmError(result.stderr + result.stdout)
    return result.stdout


def one(resources: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    """The single resource of `kind` (and `name`, when given); fails the test otherwise."""
    found = [
        r
        for r in resources
        if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def tool_path(script: str) -> str:
    """Path of a pinned tool that ``tools/<script> --path`` builds or installs once."""
    result = subprocess.run(
        [str(REPO / "tools" / script), "--path"],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.fail(f"tools/{script} could not provide the tool:\n{result.stderr[-4000:]}")
    return result.stdout.strip()
