"""README.md is the user's page, at most 300 lines (issue 56): what, quickstart, run it yourself,
pipelines, configuration, guarantees, operations, errors; the long tables, the method and the
history live in docs/, and every link README has into docs/ names a page and heading there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 300
SECTIONS = (
    "## Quickstart", "## Run the bridge yourself", "## Pipelines", "## Configuration",
    "## Guarantees and their limits", "## Operations", "## Errors and exit codes",
)  # fmt: skip


def test_readme_is_at_most_300_lines_keeps_the_users_sections_and_links_what_moved() -> None:
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"
    assert [s for s in SECTIONS if f"\n{s}\n" not in text] == []
    broken = []
    for page, anchor in re.findall(r"\]\((docs/[\w./-]+\.md)(?:#([\w-]+))?\)", text):
        target = ROOT / page
        if not target.exists():
            broken.append(page)
        elif anchor and anchor not in _anchors(target.read_text()):
            broken.append(f"{page}#{anchor}")
    assert broken == []


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors (lower case, punctuation dropped, spaces to hyphens) and the
    page's explicit ``<a id=...>`` ones."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    return slugs | set(re.findall(r'<a id="([\w-]+)">', markdown))
