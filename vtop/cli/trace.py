"""`vtop trace info TRACE`, `vtop trace list`: the command line around `vtop.trace.info` and
`vtop.cli.trace_list`.

The trace package reads the file and says what it holds as lines; this module parses the
arguments, prints the lines (quietly when the reader went away: `vtop trace info F | head`),
and turns an unreadable trace into one line on stderr and exit 3 (UNKNOWN: nothing could be
read). `info` takes a path or a shipped trace's name, as `--replay` does (one resolver:
`vtop.cli.shipped_traces.resolve`). Both print to the terminal's width, 80 columns on a pipe.
Without a command the help is printed (exit 2): it names them.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from vtop.cli import shipped_traces as shipped
from vtop.cli import trace_list
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.output import fail, warning, write_stdout
from vtop.cli.usage import OneLineParser
from vtop.trace.info import describe
from vtop.trace.reader import TraceError, TraceReader


def build_parser() -> OneLineParser:
    """`vtop trace info FILE`, `vtop trace list` (also what `vtop completion` completes)."""
    parser = OneLineParser(prog="vtop trace", description="Inspect recorded traces.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="header, duration, polls, samples and size of a trace")
    info.add_argument(
        "file",
        metavar="FILE",
        help="a trace written by vtop --record, or a shipped one by name (vtop trace list)",
    )
    sub.add_parser(
        "list",
        help="the traces vtop ships (and those in ./traces/): the names --replay takes",
    )
    return parser


def main(argv: Sequence[str]) -> int:
    """`vtop trace …` (the words after `trace`); returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.command is None:  # the help names the commands (argparse would say "command")
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    width = _width()
    if args.command == "list":
        rows = trace_list.entries(Path.cwd())
        if not rows:
            return fail(f"no traces: none shipped in {shipped.shipped_dir()}", EXIT_UNKNOWN)
        write_stdout("\n".join(trace_list.table(rows, width)) + "\n")
        return EXIT_OK
    try:
        with TraceReader(shipped.resolve(args.file), warn=warning) as reader:
            reader.check()  # damage behind a sound footer is said, not hidden by the totals
            lines = describe(reader, width)
    except TraceError as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    write_stdout("\n".join(lines) + "\n")
    return EXIT_OK


def _width() -> int:
    """The terminal's columns (80 on a pipe, or where `COLUMNS` says), kept to 60-160."""
    return min(max(shutil.get_terminal_size((80, 24)).columns, 60), 160)
