"""Command-line usage errors: one line on stderr, and an exit code that means "usage".

argparse answers a bad argument with its whole usage block (nine lines and more) and exit 2.
Under `--report` that collides with the monitoring-plugin convention vtop follows there (0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN): a scheduler would read a typo as CRITICAL. Plugins exit
UNKNOWN on invalid arguments, so with `--report` on the command line a usage error exits 3;
everywhere else it exits 2, the usual convention of command-line tools.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

EXIT_USAGE = 2
EXIT_UNKNOWN = 3


def report_requested(argv: Sequence[str]) -> bool:
    """True when `--report` (or an unambiguous abbreviation argparse would accept) is given."""
    for arg in argv:
        if arg == "--":
            return False
        name = arg.partition("=")[0]
        if len(name) >= len("--repo") and "--report".startswith(name):
            return True
    return False


def usage_exit_code(argv: Sequence[str]) -> int:
    """3 (UNKNOWN) when the command line asks for a report, else 2."""
    return EXIT_UNKNOWN if report_requested(argv) else EXIT_USAGE


class OneLineParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line naming the argument, and `exit_code`.

    Sub-parsers made from it (`add_subparsers`) are of this class too; set their `exit_code`.
    """

    exit_code: int = EXIT_USAGE

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(self.exit_code, f"{self.prog}: error: {text} (see {self.prog} --help)\n")
