"""The command line: the only layer that parses arguments, dispatches commands, picks exit codes
and writes what a user reads on stdout and stderr.

`vtop.cli.dispatch.console` is the program (`vtop = "vtop.cli:console"`, `python -m vtop`);
`main` runs a command line and returns its exit code. The layers below (report, triage,
trace, sim, sources) do the work as functions of plain values that return values or raise
typed errors; they never import this package. Its modules:

    dispatch.py    the first word to a command (`COMMANDS`), else the monitor
    monitor.py     the monitor's parser and modes (`--once`; screens and headless below)
    sources.py     the source the flags ask for       screens.py   the dashboard, the replay
    headless.py    --report, --record, --replay …     train.py     the text training quiz
    web.py         --web: the dashboard to browsers (the server: vtop.ui.web)
    rules.py, rules_export.py, trace.py, sim.py, completion.py   the commands
    prometheus_args.py, targets_args.py   the flags that name what to watch
    connection_args.py   how to reach a server (--header, --ca-cert), the knobs it hides
    exits.py       the exit codes, and `Exits`        usage.py     one-line usage errors
    output.py      `vtop: …` on stderr, documents on stdout; actions.py  --version, --schema
    examples.py    the `examples:` that ends every --help, by parser (`OneLineParser`)

What tests and benches reach for is re-exported here.
"""

from vtop.cli.dispatch import console, main
from vtop.cli.monitor import build_parser
from vtop.cli.screens import replay_screen_wanted, run_tui
from vtop.cli.sources import make_source

__all__ = ["build_parser", "console", "main", "make_source", "replay_screen_wanted", "run_tui"]
