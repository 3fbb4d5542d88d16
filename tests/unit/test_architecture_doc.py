"""docs/architecture.md lists the import layers as tests/unit/test_import_graph.py enforces
them: the same layers, in the same order, with the same modules and independent parts."""

from __future__ import annotations

import re

from tests.unit.test_import_graph import LAYERS, ROOT, Layer

_ITEM = re.compile(r"^\d+\. \*\*(?P<name>[^*]+)\*\*: (?P<parts>.+)$")


def documented_layers(text: str) -> list[tuple[str, tuple[tuple[str, ...], ...]]]:
    """``(name, parts)`` of each item of the numbered layer list (``·`` splits the parts; a
    trailing remark in parentheses is not a module)."""
    found = []
    for line in text.splitlines():
        item = _ITEM.match(line)
        if item is None:
            continue
        parts = tuple(
            tuple(re.findall(r"`([^`]+)`", part.split(" (")[0]))
            for part in item["parts"].split(" · ")
        )
        found.append((item["name"], parts))
    return found


def enforced(layers: tuple[Layer, ...]) -> list[tuple[str, tuple[tuple[str, ...], ...]]]:
    return [(layer.name, layer.parts) for layer in layers]


def test_the_architecture_page_lists_the_layers_the_import_graph_test_enforces() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert documented_layers(text) == enforced(LAYERS)


def test_a_layer_out_of_order_or_missing_a_module_is_found() -> None:
    text = "1. **low**: `pkg.low`\n2. **top**: `pkg.top`, `pkg.cli` · `pkg.side` (remark)\n"
    layers = (
        Layer("top", (("pkg.top", "pkg.cli"), ("pkg.side",)), ""),
        Layer("low", (("pkg.low",),), ""),
    )
    assert documented_layers(text) == [
        ("low", (("pkg.low",),)),
        ("top", (("pkg.top", "pkg.cli"), ("pkg.side",))),
    ]
    assert documented_layers(text) != enforced(layers)
    assert list(reversed(documented_layers(text))) == enforced(layers)
