"""The house rules on size, as rules: no function in the service over 60 lines, no module
over 400 (STYLE.md). A function that grows past it is asking to be split; the checker is shown
failing on a planted long function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400


def long_functions(path: Path, root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``module:function (N lines)`` for each function of ``path`` longer than ``limit``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{path.relative_to(root)}:{node.name} ({lines} lines)")
    return found


def test_no_function_of_the_service_is_over_60_lines() -> None:
    found = [f for p in sorted((ROOT / "app").rglob("*.py")) for f in long_functions(p)]
    assert found == []


def test_no_module_of_the_service_is_over_400_lines() -> None:
    sizes = {p: len(p.read_text().splitlines()) for p in (ROOT / "app").rglob("*.py")}
    assert {str(p.relative_to(ROOT)): n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_a_long_function_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    planted.write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert long_functions(planted, tmp_path) == [
        f"planted.py:long ({MAX_FUNCTION_LINES + 1} lines)"
    ]
