"""The import graph of the service: no cycle anywhere, and no import against the layers.

Every import statement counts, at module level or inside a function, under ``TYPE_CHECKING``
too: a lazy import that papers over a cycle is still a cycle. The checker reads the source
with :mod:`ast` (nothing is imported), so it also runs on the fake packages below that show it
can fail.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "changelog", "spark_jobs")


@dataclass(frozen=True)
class Layer:
    """Modules that may import their own layer and the layers below, never one above.

    ``parts`` of one layer are independent: none imports another.
    """

    name: str
    parts: tuple[tuple[str, ...], ...]
    why: str


# Top to bottom. A module belongs to the layer with a prefix naming it or a package above it.
LAYERS = (
    Layer("commands", (("app.commands", "app.__main__"),),
          "what a user runs; nothing in the service depends on a command"),
    Layer("runner", (("app.runner",),), "process life: signals, endpoints, exit codes"),
    Layer("engine", (("app.engine",),),
          "the loop and its collaborators drive the sink, the pipeline and state, not the reverse"),
    Layer("sink", (("app.sink",),),
          "output rows and dead letters, written by the one writer; it never runs the pipeline"),
    Layer("pipeline", (("app.pipeline",),),
          "steps reach state through app.state.access; state never knows a step"),
    Layer("state", (("app.state",),),
          "stores and recovery use changelogs; a changelog never knows a store"),
    Layer("config", (("app.config", "app.settings_checks"),),
          "the settings tree every room above reads"),
    Layer("ops", (("app.ops",),),
          "metrics, health, logs, progress and lag, for every room above"),
    Layer("formats and offsets", (("app.serde",), ("app.offsets",)),
          "wire formats and where committed offsets live: leaves behind one port each"),
    Layer("kafka", (("app.kafka",),),
          "how the bridge reaches Kafka: client settings, ports, the one error classifier"),
    Layer("base", (("app.errors",),), "the exception tree every room shares"),
    Layer("libraries", (("changelog",), ("spark_jobs",)),
          "packages of their own: nothing of app, and not each other"),
)  # fmt: skip

# Walls inside the layering: (importer, forbidden, why).
WALLS = (
    ("app.sink", ("app.pipeline.fusion", "app.pipeline.spec", "app.pipeline.builder",
                  "app.pipeline.rewriter", "app.pipeline.expressions", "app.pipeline.steps",
                  "app.pipeline.stateful"),
     "the sink writes rows; compiling or running the pipeline is the engine's business"),
)  # fmt: skip


def modules(root: Path, packages: Sequence[str]) -> dict[str, Path]:
    """Dotted module name → source file, for every module of ``packages`` under ``root``."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The known modules that ``name`` imports anywhere in its source."""
    known = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(_nearest(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # ``from pkg import module`` imports that module
                full = f"{base}.{alias.name}"
                targets.add(full if full in known else _nearest(base, known))
    targets.discard("")
    targets.discard(name)
    return targets


def _nearest(dotted: str, known: set[str]) -> str:
    """``dotted`` or its closest enclosing known module; "" for a module outside the tree."""
    parts = dotted.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def place(module: str, layers: Sequence[Layer]) -> tuple[int, int] | None:
    """(layer index from the top, part index) of ``module``; None when no layer names it."""
    best: tuple[int, int, int] | None = None
    for i, layer in enumerate(layers):
        for j, part in enumerate(layer.parts):
            for prefix in part:
                inside = module == prefix or module.startswith(prefix + ".")
                if inside and (best is None or len(prefix) > best[2]):
                    best = (i, j, len(prefix))
    return None if best is None else best[:2]


def violations(
    graph: dict[str, set[str]], layers: Sequence[Layer], roots: Sequence[str] = PACKAGES
) -> list[str]:
    """One line per import against the layers, and per module no layer names (the
    top-level packages' own ``__init__`` files, ``roots``, need none)."""
    found = []
    for module in sorted(graph):
        here = place(module, layers)
        if here is None:
            if module not in roots:
                found.append(f"{module}: in no layer (add it to LAYERS)")
            continue
        for target in sorted(graph[module]):
            there = place(target, layers)
            if there is None:
                continue
            if there[0] < here[0]:
                found.append(
                    f"{module} ({layers[here[0]].name}) imports {target} "
                    f"({layers[there[0]].name}): upward"
                )
            elif there[0] == here[0] and there[1] != here[1]:
                found.append(f"{module} imports {target}: independent parts of one layer")
    return found


def breaches(
    graph: dict[str, set[str]], walls: Sequence[tuple[str, tuple[str, ...], str]]
) -> list[str]:
    """One line per import through a wall."""
    found = []
    for importer, forbidden, why in walls:
        for module in sorted(m for m in graph if m == importer or m.startswith(importer + ".")):
            for target in sorted(graph[module]):
                if any(target == f or target.startswith(f + ".") for f in forbidden):
                    found.append(f"{module} imports {target}: {why}")
    return found


def rooms(graph: dict[str, set[str]], depth: int = 2) -> dict[str, set[str]]:
    """The graph between rooms (``app.engine``, ``app.config``, ...): modules folded into the
    package ``depth`` names deep."""
    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        room = ".".join(module.split(".")[:depth])
        folded.setdefault(room, set()).update(".".join(t.split(".")[:depth]) for t in targets)
        folded[room].discard(room)
    return folded


def graph_of(root: Path, packages: Sequence[str]) -> dict[str, set[str]]:
    found = modules(root, packages)
    return {name: imports(name, path, found) for name, path in found.items()}


# ---- the service -----------------------------------------------------------------------------


@functools.cache
def service() -> dict[str, set[str]]:
    """The service's graph, read once for the tests below (each read parses every module)."""
    return graph_of(ROOT, PACKAGES)


def test_the_service_has_no_import_cycle() -> None:
    assert cycles(service()) == []


def test_every_import_goes_down_the_layers() -> None:
    assert violations(service(), LAYERS) == []


def test_no_import_goes_through_a_wall() -> None:
    assert breaches(service(), WALLS) == []


def test_the_rooms_have_no_cycle_between_them() -> None:
    assert cycles(rooms(service())) == []


def test_changelog_imports_nothing_of_the_bridge() -> None:
    graph = service()
    assert {t for m, ts in graph.items() if m.startswith("changelog") for t in ts} <= {
        m for m in graph if m.startswith("changelog")
    }


# ---- the checker can fail --------------------------------------------------------------------


def _package(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_a_cycle_through_a_lazy_import_is_found(tmp_path: Path) -> None:
    _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import f\n",
        "pkg/b.py": "def f():\n    from pkg import c\n",
        "pkg/c.py": "from . import a\n",
        "pkg/d.py": "import pkg.a\n",
    })  # fmt: skip
    assert cycles(graph_of(tmp_path, ["pkg"])) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_an_upward_import_and_a_module_in_no_layer_are_found(tmp_path: Path) -> None:
    _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/top.py": "import pkg.low\n",
        "pkg/low/__init__.py": "",
        "pkg/low/x.py": "from pkg.top import thing\n",
        "pkg/low/y.py": "from pkg.side import other\n",
        "pkg/side.py": "",
        "pkg/stray.py": "",
    })  # fmt: skip
    layers = (
        Layer("top", (("pkg.top",),), "uses low"),
        Layer("low", (("pkg.low",), ("pkg.side",)), "two independent parts"),
    )
    assert violations(graph_of(tmp_path, ["pkg"]), layers, roots=("pkg",)) == [
        "pkg.low.x (low) imports pkg.top (top): upward",
        "pkg.low.y imports pkg.side: independent parts of one layer",
        "pkg.stray: in no layer (add it to LAYERS)",
    ]


def test_a_breached_wall_and_a_cycle_between_rooms_are_found(tmp_path: Path) -> None:
    _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sink/__init__.py": "",
        "pkg/sink/out.py": "from pkg.pipe.compiler import f\nfrom pkg.pipe.record import Row\n",
        "pkg/pipe/__init__.py": "",
        "pkg/pipe/compiler.py": "from pkg.sink import out\n",
        "pkg/pipe/record.py": "",
    })  # fmt: skip
    graph = graph_of(tmp_path, ["pkg"])
    walls = (("pkg.sink", ("pkg.pipe.compiler",), "no compiler"),)
    assert breaches(graph, walls) == ["pkg.sink.out imports pkg.pipe.compiler: no compiler"]
    assert cycles(rooms(graph)) == [["pkg.pipe", "pkg.sink"]]
