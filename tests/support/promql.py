"""Metric names in PromQL expressions and in a Prometheus text exposition.

Enough of PromQL for the chart's dashboard and alert rules: strings, label matchers, range and
subquery brackets and grouping clauses are cut out; what is left that is neither a function
call nor a keyword is a metric name. A name this misses would make a check pass wrongly, so
tests/unit/test_promql.py pins it on every construct the chart uses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"}
)


def metric_names(expr: str) -> set[str]:
    """Every metric name a PromQL expression selects."""
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group().lower() not in _KEYWORDS:
            names.add(match.group())
    return names


def exported_names(exposition: str) -> set[str]:
    """Sample names a ``/metrics`` text offers: the samples present, plus those every declared
    family has (a labelled counter with no child yet has a ``# TYPE`` line but no sample)."""
    suffixes = {"histogram": ["_bucket", "_sum", "_count"]}
    names = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            if kind == "counter":  # declared as x_total in the text format, x in OpenMetrics
                family = family.removesuffix("_total") + "_total"
            names.update(family + s for s in suffixes.get(kind, [""]))
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def dashboard_exprs(path: Path) -> list[str]:
    """The query of every target of every panel (rows' nested panels included)."""
    dashboard = json.loads(path.read_text())
    panels = list(dashboard["panels"])
    exprs = []
    while panels:
        panel = panels.pop()
        panels += panel.get("panels", [])
        exprs += [t["expr"] for t in panel.get("targets", [])]
    return exprs


def rule_exprs(rendered: str) -> list[str]:
    """The ``expr`` of every rule of every PrometheusRule in a rendered chart."""
    docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(rendered) if d]
    return [
        rule["expr"]
        for doc in docs
        if doc["kind"] == "PrometheusRule"
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
    ]


def yaml_blocks(markdown: Path) -> list[Any]:
    """Every ```yaml block of a Markdown file, parsed."""
    text = markdown.read_text()
    return [yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)]


def keda_queries(markdown: Path) -> list[str]:
    """The query of every Prometheus trigger of the KEDA examples in a Markdown file."""
    return [
        trigger["metadata"]["query"]
        for block in yaml_blocks(markdown)
        for trigger in (block.get("spec", block) if isinstance(block, dict) else {}).get(
            "triggers", []
        )
        if trigger["type"] == "prometheus"
    ]
