"""`vtop completion bash|zsh|fish`: shell completion scripts, generated from the parsers.

A hand-written completion script drifts from the command line the day a flag is added; this
one is written by shtab from the very argparse parsers vtop runs with, so every flag, choice
and sub-command is there by construction. The command line is dispatched on its first word
(`vtop.cli.dispatch.COMMANDS`, else the monitor's flags), so the tree shtab walks is assembled
here from that table: the monitor's parser with each command's own parser hung under it.

Arguments that take a path complete file names (directories for `DIR`), and a few take their
choices from the code: `--demo` and `vtop sim --scenario` the simulator's scenarios,
`--emulate-version` its dialects. Setting those only on the tree built here changes nothing
for the parsers that run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import shtab

from vtop.cli.exits import EXIT_OK
from vtop.cli.usage import OneLineParser

SHELLS = ("bash", "zsh", "fish")
INSTALL = {
    "bash": "vtop completion bash > ~/.local/share/bash-completion/completions/vtop",
    "zsh": 'vtop completion zsh > "${fpath[1]}/_vtop"   # a directory on $fpath; then compinit',
    "fish": "vtop completion fish > ~/.config/fish/completions/vtop.fish",
}


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="vtop completion",
        description="Print a shell completion script for vtop. Install it with:\n  "
        + "\n  ".join(INSTALL.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return parser.add_subparsers(dest="command", metavar="COMMAND")


def _hang(
    sub: argparse._SubParsersAction[Any], name: str, parser: argparse.ArgumentParser, help_: str
) -> argparse.ArgumentParser:
    """`parser` as sub-command `name` of `sub` (argparse makes a new one; this one replaces it)."""
    sub.add_parser(name, help=help_)
    sub.choices[name] = parser
    return parser


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _parsers(child)


def command_tree() -> argparse.ArgumentParser:
    """Every command line vtop accepts, as one argparse tree."""
    from vtop.cli.dispatch import COMMANDS
    from vtop.cli.monitor import build_parser as monitor_parser
    from vtop.sim.dialects import DIALECTS
    from vtop.sim.scenarios import SCENARIOS

    root = monitor_parser()
    sub = _subparsers(root)
    for name, command in COMMANDS.items():
        _hang(sub, name, command.parser(), command.help)
    for parser in _parsers(root):
        for action in parser._actions:
            flags = set(action.option_strings)
            if flags & {"--demo", "--scenario"}:
                action.choices = list(SCENARIOS)
            elif "--emulate-version" in flags:
                action.choices = list(DIALECTS)
            elif action.metavar == "DIR":
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
            elif action.metavar in ("FILE", "PATH", "FILE_OR_DIR"):
                action.complete = shtab.FILE  # type: ignore[attr-defined]
    return root


def script(shell: str) -> str:
    """The completion script for `shell` (one of SHELLS)."""
    return shtab.complete(command_tree(), shell=shell)


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    sys.stdout.write(script(args.shell))
    return EXIT_OK
