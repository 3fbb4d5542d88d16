"""Fixtures of the deployment tests: the pinned helm and chart rendering."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml

from .helpers import CHART, NAMESPACE, RELEASE, REPO, Manifest, run_helm


@pytest.fixture(scope="session")
def helm() -> str:
    """Path of the pinned helm binary, built once into the cache by tools/helm.sh."""
    result = subprocess.run(
        [str(REPO / "tools" / "helm.sh"), "--path"],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"tools/helm.sh could not provide helm:\n{result.stderr[-4000:]}")
    return result.stdout.strip()


@pytest.fixture(scope="session")
def template(helm: str) -> Callable[..., str]:
    """`helm template` of the chart with values files and --set pairs; returns the YAML text."""

    def render(
        *values_files: Path,
        sets: Sequence[str] = (),
        kube_version: str | None = None,
    ) -> str:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        for path in values_files:
            args += ["--values", str(path)]
        for pair in sets:
            args += ["--set", pair]
        if kube_version:
            args += ["--kube-version", kube_version]
        return run_helm(helm, args)

    return render


@pytest.fixture(scope="session")
def manifests(template: Callable[..., str]) -> Callable[..., list[Manifest]]:
    """Like `template`, parsed into a list of resources."""

    def render(*values_files: Path, sets: Sequence[str] = ()) -> list[Manifest]:
        text = template(*values_files, sets=sets)
        return [doc for doc in yaml.safe_load_all(text) if doc]

    return render
