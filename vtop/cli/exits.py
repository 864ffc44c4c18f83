"""Exit codes on the command line: which code a command line gets, in one small object.

The codes themselves, and the verdict's mapping and `--fail-on` policy, are `vtop.exits`'
(`ExitCode`), on the ground floor, so that the report and the screens use the same ones; the
names below are the command line's spelling of them. vtop gives a verdict under `--report`,
and there it follows the monitoring-plugin convention: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
Everywhere else a usage error exits 2, the usual convention of command-line tools. The two
collide on 2: under `--report` a scheduler would read a typo as CRITICAL, and plugins exit
UNKNOWN on invalid arguments, so with `--report` on the command line a usage error exits 3.

`Exits` is made once per command line, before its arguments are parsed (a parse error already
needs it), and handed to whatever runs the mode; nobody passes a bare code around by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop.exits import ExitCode, FailOn, Verdict, fail_on_code

EXIT_OK = ExitCode.OK
EXIT_WARNING = ExitCode.WARNING
EXIT_CRITICAL = ExitCode.CRITICAL
EXIT_UNKNOWN = ExitCode.UNKNOWN
"""Nothing could be read (a trace, a server): no verdict either way."""
EXIT_USAGE = ExitCode.USAGE
"""A command line that cannot work, outside `--report`."""
EXIT_FAILED = ExitCode.FAILED
"""Something asked for went wrong without a verdict: a recording that could not be written,
rule files with errors, failing rule tests."""
EXIT_INTERRUPTED = ExitCode.INTERRUPTED
"""Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2)."""
EXIT_PIPE = ExitCode.PIPE
"""stdout's reader went away, as a shell reports a process ended by SIGPIPE (128 + 13)."""


def report_requested(argv: Sequence[str]) -> bool:
    """True when `--report` (or an unambiguous abbreviation argparse would accept) is given."""
    for arg in argv:
        if arg == "--":
            return False
        name = arg.partition("=")[0]
        if len(name) >= len("--repo") and "--report".startswith(name):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Exits:
    """The exit codes of one command line: whether `--report` is on decides its usage code."""

    report: bool = False

    @classmethod
    def for_argv(cls, argv: Sequence[str]) -> Exits:
        """From the raw arguments (`--report` as argparse would recognise it), before parsing."""
        return cls(report=report_requested(argv))

    @property
    def usage(self) -> ExitCode:
        """A usage error, or an error that is no verdict: never CRITICAL's 2 under --report."""
        return EXIT_UNKNOWN if self.report else EXIT_USAGE

    @staticmethod
    def verdict(status: Verdict, fail_on: FailOn = "warning") -> ExitCode:
        """A report's status as an exit code (`vtop.exits.fail_on_code`): UNKNOWN is always 3;
        below `fail_on`, 0."""
        return fail_on_code(status, fail_on)
