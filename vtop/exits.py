"""Every exit code vtop ends with, typed, and the two policies that pick one from a verdict.

A report's verdict follows the monitoring-plugin convention (0 OK, 1 WARNING, 2 CRITICAL,
3 UNKNOWN), and the report writes the same code into its document. The rest of vtop follows
the usual conventions of command-line tools: 2 for a usage error, 1 for something asked for
that went wrong without a verdict, 128 + N for a process ended by signal N. Those numbers
collide with the verdicts' (1 and 2), so `FAILED` and `USAGE` are aliases of `WARNING` and
`CRITICAL` here: one number, two meanings, and the alias says which one a caller means.
`vtop.cli.exits` decides when a usage error is 3 instead (under `--report`).

This sits on the ground floor because the report (which writes the code into its document),
the screens (which end with `HANGUP` when the terminal goes) and the command line all need
it, and the screens and the report may not import the command line.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Literal, get_args

Verdict = Literal["OK", "WARNING", "CRITICAL", "UNKNOWN"]
"""A report's status, as its document writes it."""
FailOn = Literal["warning", "critical"]
"""`--fail-on`: the lowest verdict that makes a report's exit code non-zero."""


class ExitCode(IntEnum):
    """The exit codes of the `vtop` process; README's table lists the same names."""

    OK = 0
    """The verdict OK, and any command that did what it was asked."""
    WARNING = 1
    """A report's WARNING finding counts (or an endpoint could not be read while others could)."""
    CRITICAL = 2
    """A report's CRITICAL finding counts."""
    UNKNOWN = 3
    """Nothing could be read (a trace, a server), no verdict yet, or a usage error under
    `--report` (a scheduler must not read a typo as CRITICAL); also an unexpected error."""
    FAILED = 1
    """Something asked for went wrong without a verdict: a recording that could not be
    written, rule files with errors, failing rule tests (the number of WARNING)."""
    USAGE = 2
    """A command line that cannot work, outside `--report` (the number of CRITICAL)."""
    HANGUP = 129
    """The terminal went away under a screen: 128 + SIGHUP, as a hangup ends a process."""
    INTERRUPTED = 130
    """Ctrl-C: 128 + SIGINT, as a shell reports a process ended by it."""
    PIPE = 141
    """The reader of stdout went away (`vtop rules list | head -1`): 128 + SIGPIPE, what a
    shell reports for a tool SIGPIPE ended (`git log | head`); nothing is said."""


VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
"""The verdicts, best first: their codes rise in this order."""


def verdict_code(status: Verdict) -> ExitCode:
    """The code a verdict stands for, as the report's document writes it (`exit_code`): the
    verdict's name is the code's, so the two cannot drift."""
    if status not in VERDICTS:
        raise ValueError(f"not a verdict: {status!r}")
    return ExitCode[status]


def fail_on_code(status: Verdict, fail_on: FailOn = "warning") -> ExitCode:
    """The process's exit code for a report's verdict under `--fail-on`: UNKNOWN is always 3
    (no verdict is never a pass), a verdict below `fail_on` exits 0, any other its own code."""
    code = verdict_code(status)
    if code is ExitCode.UNKNOWN:
        return code
    return code if code >= verdict_code(fail_on_verdict(fail_on)) else ExitCode.OK


def fail_on_verdict(fail_on: FailOn) -> Verdict:
    """The verdict `--fail-on` names (`critical` -> CRITICAL); anything else is refused, so a
    misspelt policy can never pass everything."""
    if fail_on not in get_args(FailOn):
        raise ValueError(f"--fail-on takes warning or critical, not {fail_on!r}")
    return "WARNING" if fail_on == "warning" else "CRITICAL"
