"""kube-score and checkov findings on rendered charts, and the allow-list that accepts some.

A finding is (tool, check id, resource, values set). The allow-list
(deploy/helm/lint-allowlist.yaml) accepts findings by tool and check id, optionally only for
some resource kinds or some values sets, each with a one-line reason.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .helpers import REPO

ALLOWLIST = REPO / "deploy" / "helm" / "lint-allowlist.yaml"


@dataclass(slots=True, frozen=True)
class Finding:
    tool: str
    check: str
    kind: str
    name: str
    values: str
    summary: str

    def __str__(self) -> str:
        return f"{self.tool} {self.check} {self.kind}/{self.name} [{self.values}]: {self.summary}"


@dataclass(slots=True, frozen=True)
class Allowed:
    tool: str
    check: str
    reason: str
    kinds: tuple[str, ...] = ()
    values: tuple[str, ...] = ()

    def accepts(self, finding: Finding) -> bool:
        return (
            finding.tool == self.tool
            and finding.check == self.check
            and (not self.kinds or finding.kind in self.kinds)
            and (not self.values or finding.values in self.values)
        )


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowed]:
    doc = yaml.safe_load(path.read_text())
    return [
        Allowed(
            tool=tool,
            check=entry["check"],
            reason=entry["reason"],
            kinds=tuple(entry.get("kinds", ())),
            values=tuple(entry.get("values", ())),
        )
        for tool, entries in doc.items()
        for entry in entries
    ]


def run_tool(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def kube_score(binary: str, rendered: Path, values: str) -> list[Finding]:
    """Every kube-score check graded below OK (skipped checks are not findings)."""
    result = run_tool([binary, "score", "--output-format", "json", str(rendered)])
    if result.returncode not in (0, 1):  # 1: findings; anything else: kube-score failed
        raise AssertionError(f"kube-score failed ({result.returncode}): {result.stderr}")
    findings = []
    for obj in json.loads(result.stdout):
        for check in obj["checks"]:
            if check["skipped"] or check["grade"] >= 10:
                continue
            findings.append(
                Finding(
                    "kube-score",
                    check["check"]["id"],
                    obj["type_meta"]["kind"],
                    obj["object_meta"]["name"],
                    values,
                    "; ".join(sorted({c["summary"] for c in check["comments"]})),
                )
            )
    return findings


def checkov(binary: str, rendered_dir: Path) -> tuple[list[Finding], set[str]]:
    """Every failed checkov check over the directory of renderings (one file per values set),
    and the values sets checkov examined (it silently skips a file it takes for a template)."""
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_NO_OUTPUT_COLOR": "1"}
    result = subprocess.run(
        [binary, "--directory", str(rendered_dir), "--framework", "kubernetes",
         "--output", "json", "--compact", "--quiet", "--skip-download"],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    if result.returncode not in (0, 1):
        raise AssertionError(f"checkov failed ({result.returncode}): {result.stderr[-2000:]}")
    reports: Any = json.loads(result.stdout)
    if isinstance(reports, dict):
        reports = [reports]
    findings = []
    examined: set[str] = set()
    for report in reports:
        results = report.get("results", {})
        for passed in results.get("passed_checks", []):
            examined.add(Path(passed["file_path"]).stem)
        for failed in results.get("failed_checks", []):
            kind, _namespace, name = failed["resource"].split(".", 2)
            findings.append(
                Finding(
                    "checkov",
                    failed["check_id"],
                    kind,
                    name,
                    Path(failed["file_path"]).stem,
                    failed["check_name"],
                )
            )
    return findings, examined | {f.values for f in findings}
