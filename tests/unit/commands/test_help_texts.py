"""Every ``--help`` of the CLI says values as the user writes them: ``topic``, never a Python
repr such as ``<SubjectStrategy.TOPIC: 'topic'>`` (issue 56)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from app.commands.cli import build_parser

# An enum member's repr, or an object's default repr.
PYTHON_REPR = re.compile(r"<\w+(\.\w+)+: |<\w+(\.\w+)* object at 0x")


def _parsers(
    parser: argparse.ArgumentParser, path: str = "eos-bridge"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_no_help_of_any_command_shows_a_python_repr() -> None:
    found = dict(_parsers(build_parser()))
    assert "eos-bridge dlq replay" in found and len(found) >= 20, sorted(found)
    shown = {
        path: match.group(0)
        for path, parser in found.items()
        if (match := PYTHON_REPR.search(parser.format_help()))
    }
    assert shown == {}
