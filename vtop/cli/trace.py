"""`vtop trace info FILE`: the command line around `vtop.trace.info.describe`.

The trace package reads the file and says what it holds as lines; this module parses the
arguments, prints the lines (quietly when the reader went away: `vtop trace info F | head`),
and turns an unreadable trace into one line on stderr and exit 3 (UNKNOWN: nothing could be
read). Without a command the help is printed (exit 2): it names them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.output import fail, warning, write_stdout
from vtop.cli.usage import OneLineParser
from vtop.trace.info import describe
from vtop.trace.reader import TraceError, TraceReader


def build_parser() -> OneLineParser:
    """`vtop trace info FILE` (also what `vtop completion` completes)."""
    parser = OneLineParser(prog="vtop trace", description="Inspect recorded traces.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="header, duration, polls, samples and size of a trace")
    info.add_argument("file", metavar="FILE", help="a trace written by vtop --record")
    return parser


def main(argv: Sequence[str]) -> int:
    """`vtop trace …` (the words after `trace`); returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.command is None:  # the help names the commands (argparse would say "command")
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        with TraceReader(args.file, warn=warning) as reader:
            reader.check()  # damage behind a sound footer is said, not hidden by the totals
            lines = describe(reader)
    except TraceError as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    write_stdout("\n".join(lines) + "\n")
    return EXIT_OK
