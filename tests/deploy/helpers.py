"""Paths and small helpers shared by the deployment tests."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
