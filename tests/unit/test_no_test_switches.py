"""No switch in the service that a pod's environment or settings could turn on to weaken
exactly-once (issue 55): faults reach the service only through its composition
(:class:`app.engine.faults.Faults`, :class:`spark_jobs.faults.Faults`), handed in by the test
rig's launchers. The checker is shown failing on planted modules."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from app.config import BridgeSettings

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ("app", "spark_jobs")
# A variable name of ours that says test or fault: EOS_BRIDGE_TEST_..., EOS_SPARK_FAULT, ...
_SWITCH_NAME = re.compile(r"^(EOS|BRIDGE|SPARK)_\w*(TEST|FAULT)", re.IGNORECASE)
_SWITCH_WORD = re.compile(r"TEST|FAULT", re.IGNORECASE)
_SETTING_WORD = re.compile(r"(^|[._])(tests?|faults?)($|[._])")  # not use_latest_version
_ENV_READS = frozenset({"getenv", "get", "environ", "__getitem__"})


def _reads_env(node: ast.AST) -> ast.expr | None:
    """The name argument of ``os.environ.get(x)``, ``os.getenv(x)``, ``environ[x]``."""
    if isinstance(node, ast.Subscript) and _names_environ(node.value):
        return node.slice
    if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
        func = node.func
        if func.attr == "getenv" or (func.attr in _ENV_READS and _names_environ(func.value)):
            return node.args[0]
    return None


def _names_environ(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in {"environ", "env"}


def switches(path: Path, root: Path = ROOT) -> list[str]:
    """``module:line: what`` for every test or fault switch that ``path`` reads or names."""
    found = []
    where = path.relative_to(root)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and _matches(_SWITCH_NAME.match, node.value):
            found.append(f"{where}:{node.lineno}: names {node.value!r}")
        name = _reads_env(node)
        if isinstance(name, ast.Constant) and _matches(_SWITCH_WORD.search, name.value):
            found.append(f"{where}:{node.lineno}: reads {name.value!r}")
    return found


def _matches(test: Callable[[str], object], value: object) -> bool:
    return isinstance(value, str) and test(value) is not None


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    names = []
    for name, info in model.model_fields.items():
        names.append(prefix + name)
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names += _fields(annotation, f"{prefix}{name}.")
    return names


def test_no_module_of_the_service_reads_a_test_or_fault_variable() -> None:
    found = [
        s for room in SERVICE for p in sorted((ROOT / room).rglob("*.py")) for s in switches(p)
    ]
    assert found == []


def test_no_setting_is_a_test_or_fault_hook() -> None:
    assert [n for n in _fields(BridgeSettings) if _SETTING_WORD.search(n)] == []


def test_the_checker_finds_planted_switches(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os\n"
        "UNSAFE = 'EOS_BRIDGE_TEST_UNSAFE_SHARED_TXN_ID'\n"
        "a = os.environ.get('EOS_SPARK_FAULT')\n"
        "b = os.getenv('MY_FAULT_POINT')\n"
        "c = os.environ['PAUSE_FOR_TEST']\n"
        "d = os.environ.get('BRIDGE_GROUP_ID')\n"  # an ordinary setting: not a switch
    )
    assert sorted(switches(planted, tmp_path)) == [
        "planted.py:2: names 'EOS_BRIDGE_TEST_UNSAFE_SHARED_TXN_ID'",
        "planted.py:3: names 'EOS_SPARK_FAULT'",
        "planted.py:3: reads 'EOS_SPARK_FAULT'",
        "planted.py:4: reads 'MY_FAULT_POINT'",
        "planted.py:5: reads 'PAUSE_FOR_TEST'",
    ]
