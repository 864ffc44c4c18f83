"""The one entry point: `vtop [COMMAND] …` to the code that runs it, and its exit code.

The first word picks a command (`sim`, `rules`, `trace`, `completion`), each with its own
argparse parser, so its errors and `--help` name it (`vtop rules export: error: …`); any other
command line is the monitor's, whose flags choose the mode (`vtop.cli.monitor`). The monitor
is not a sub-command of a root parser: it has no command word, and a root parser would turn
its one-line errors into "invalid choice" and its `--help` into a list of commands. `COMMANDS`
is the one table of commands: the dispatcher runs from it and `vtop completion` builds its
argparse tree from it, so a command cannot be runnable and missing from completion.

Each command is imported only when it runs (the monitor's modes never load the simulator's
server or the rule tests). The exit codes are `vtop.cli.exits`'; the context that decides the
monitor's usage code (`Exits`) is made here, once, from the raw arguments.

An exception nobody expected ends here too: one line on stderr and exit 3 (UNKNOWN), in every
mode and command. A traceback exits 1, which a `--report` caller reads as WARNING; with
`VTOP_DEBUG=1` in the environment the exception goes on, traceback and all, for developers.
A reader of stdout that went away (`vtop rules list | head -1`) is no error: the
`BrokenPipeError` any command's output meets ends here, once, quietly, as `git log | head`
ends (`vtop.cli.output.reader_gone`: stdout to /dev/null, exit 141).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import NoReturn

from vtop.cli.exits import EXIT_INTERRUPTED, EXIT_UNKNOWN, Exits
from vtop.cli.output import fail, hard_exit, internal_error, reader_gone


@dataclass(frozen=True, slots=True)
class Command:
    """A command word: what `vtop --help` and completion say of it, and the module of
    `vtop.cli` that has its `build_parser()` and `main(argv)`, imported only when used."""

    help: str
    module: str

    def _load(self) -> ModuleType:
        return importlib.import_module(f"vtop.cli.{self.module}")

    def parser(self) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._load().build_parser()
        return parser

    def run(self, argv: Sequence[str]) -> int:
        code: int = self._load().main(argv)
        return code


COMMANDS: dict[str, Command] = {
    "sim": Command("serve a simulated vLLM server (a scheduler twin) on loopback", "sim"),
    "rules": Command("list, check, test and export the rules", "rules"),
    "trace": Command("inspect recorded traces", "trace"),
    "whatif": Command(
        "predict a server's figures after a knob change (a twin fitted to it)", "whatif"
    ),
    "tune": Command("restart a server with the twin's choice, measure it, keep the best", "tune"),
    "completion": Command("print a shell completion script", "completion"),
}


def console() -> NoReturn:
    """The `vtop` program (`vtop = "vtop.cli:console"`, `python -m vtop`): `main`, then out
    at once with its exit code (`hard_exit`); tests call `main` and get the code back."""
    hard_exit(main())


def main(argv: Sequence[str] | None = None) -> int:
    """`vtop ARGV`; returns the process's exit code (3, with one line, for an exception no
    code expected, unless `VTOP_DEBUG` is set)."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader went away (`| head`): quiet, 141
        return reader_gone()
    except Exception as exc:
        if os.environ.get("VTOP_DEBUG", "") not in ("", "0"):
            raise
        internal_error(exc)
        return EXIT_UNKNOWN


def _main(words: list[str]) -> int:
    # A source's warnings (a GPU lost mid-run) reach stderr through logging's last-resort
    # handler, which looks stderr up at each write (so the TUI's capture still holds them);
    # they carry the same `vtop:` prefix as every other message of ours.
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(logging.Formatter("vtop: %(message)s"))
    command = COMMANDS.get(words[0]) if words else None
    if command is not None:
        return command.run(words[1:])
    from vtop.cli import config
    from vtop.cli.monitor import build_parser, run_monitor

    exits = Exits.for_argv(words)
    parser = build_parser(exits.usage)
    try:
        config.apply(parser, words)
    except config.ConfigError as exc:
        return fail(str(exc), exits.usage)
    args = parser.parse_args(words)
    return run_monitor(args, exits, words)
