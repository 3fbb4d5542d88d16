"""``eos-bridge completion bash``: a bash completion script made from the parser itself, so it
never drifts from the commands and options it completes."""

from __future__ import annotations

import argparse

_SCRIPT = """\
# eos-bridge bash completion: source <(eos-bridge completion bash)
_eos_bridge() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" command="${{COMP_WORDS[1]}}"
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "{commands}" -- "$cur"))
        return
    fi
    case "$command" in
{cases}
    esac
}}
complete -o default -F _eos_bridge eos-bridge
"""


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], root: argparse.ArgumentParser
) -> None:
    parser = sub.add_parser("completion", help="print a shell completion script (bash)")
    parser.add_argument("shell", choices=["bash"])
    parser.set_defaults(func=lambda _args: _print(root))


def script(root: argparse.ArgumentParser) -> str:
    """The bash completion script of ``root``'s sub-commands and their options."""
    subs = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for name, parser in sorted(subs.choices.items()):
        options = sorted(s for a in parser._actions for s in a.option_strings)
        choices = sorted(
            str(c) for a in parser._actions if not a.option_strings for c in a.choices or ()
        )
        words = " ".join(options + choices)
        cases.append(f'        {name}) COMPREPLY=($(compgen -W "{words}" -- "$cur")) ;;')
    return _SCRIPT.format(commands=" ".join(sorted(subs.choices)), cases="\n".join(cases))


def _print(root: argparse.ArgumentParser) -> int:
    print(script(root), end="")
    return 0
