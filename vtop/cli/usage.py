"""Command-line usage errors: one line on stderr naming the argument, not a usage block.

argparse answers a bad argument with its whole usage block (nine lines and more) and exit 2.
`OneLineParser` says the one line that matters and points at `--help`; the exit code is the
parser's `exit_code`, which the dispatcher sets from `vtop.cli.exits.Exits` (3 under
`--report`, where 2 would read as CRITICAL), before the arguments are parsed: a parse error
must already exit with the right code.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from vtop.cli import examples
from vtop.cli.exits import EXIT_USAGE


class OneLineParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line naming the argument, and `exit_code`.

    Sub-parsers made from it (`add_subparsers`) are of this class too; set their `exit_code`.
    Its help ends with the command's examples, looked up by `prog`.
    """

    exit_code: int = EXIT_USAGE

    def format_help(self) -> str:
        """argparse's help, then this command's `examples:` (`vtop.cli.examples`)."""
        return super().format_help() + examples.section(self.prog)

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(self.exit_code, f"{self.prog}: error: {text} (see {self.prog} --help)\n")
