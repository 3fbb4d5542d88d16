"""kube-score and checkov on every ci/*-values.yaml rendering: no finding outside the allow-list.

Both tools are pinned: kube-score is built from the Go module proxy by tools/kube-score.sh,
checkov installed from PyPI into its own virtualenv by tools/checkov.sh (it cannot share the
project's environment), both cached under ~/.cache/eos-bridge.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .helpers import CHART, tool_path
from .lint import Allowed, Finding, checkov, kube_score, load_allowlist

pytestmark = pytest.mark.chart

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))


@pytest.fixture(scope="module")
def findings(
    template: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> list[Finding]:
    """Every finding of both tools over every values set (checkov runs once, over all)."""
    rendered = tmp_path_factory.mktemp("rendered")
    for values in CI_VALUES:
        (rendered / values.name.replace("-values", "")).write_text(template(values))
    score = tool_path("kube-score.sh")
    found = [
        finding
        for path in sorted(rendered.iterdir())
        for finding in kube_score(score, path, path.stem)
    ]
    from_checkov, examined = checkov(tool_path("checkov.sh"), rendered)
    assert examined == {p.stem for p in rendered.iterdir()}, "checkov skipped a rendering"
    return found + from_checkov


@pytest.fixture(scope="module")
def allowlist() -> list[Allowed]:
    return load_allowlist()


def test_both_tools_examined_every_values_set(findings: list[Finding]) -> None:
    sets = {v.name.removesuffix("-values.yaml") for v in CI_VALUES}
    assert {f.values for f in findings if f.tool == "kube-score"} == sets
    assert {f.values for f in findings if f.tool == "checkov"} == sets


def test_no_finding_outside_the_allowlist(
    findings: list[Finding], allowlist: list[Allowed]
) -> None:
    unexpected = [str(f) for f in findings if not any(a.accepts(f) for a in allowlist)]
    assert unexpected == []


def test_every_allowlist_entry_is_still_needed(
    findings: list[Finding], allowlist: list[Allowed]
) -> None:
    stale = [f"{a.tool} {a.check}" for a in allowlist if not any(a.accepts(f) for f in findings)]
    assert stale == []


def test_every_allowlist_entry_has_a_one_line_reason(allowlist: list[Allowed]) -> None:
    assert all(a.reason.strip() and "\n" not in a.reason for a in allowlist)


def test_the_allowlist_can_reject(findings: list[Finding], allowlist: list[Allowed]) -> None:
    """The network policy finding is accepted only where the policies are off."""
    mtls = [f for f in findings if f.values == "mtls" and f.check == "pod-networkpolicy"]
    assert mtls == []
    probe = Finding("kube-score", "pod-networkpolicy", "StatefulSet", "x", "mtls", "")
    assert not any(a.accepts(probe) for a in allowlist)
