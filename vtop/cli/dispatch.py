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
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vtop.cli.exits import EXIT_INTERRUPTED, Exits


@dataclass(frozen=True, slots=True)
class Command:
    """A command word: what `vtop --help` and completion say of it, its parser, its runner."""

    help: str
    parser: Callable[[], argparse.ArgumentParser]
    run: Callable[[Sequence[str]], int]


def _sim_parser() -> argparse.ArgumentParser:
    from vtop.cli import sim

    return sim.build_parser()


def _sim(argv: Sequence[str]) -> int:
    from vtop.cli import sim

    return sim.main(argv)


def _rules_parser() -> argparse.ArgumentParser:
    from vtop.cli import rules

    return rules.build_parser()


def _rules(argv: Sequence[str]) -> int:
    from vtop.cli import rules

    return rules.main(argv)


def _trace_parser() -> argparse.ArgumentParser:
    from vtop.cli import trace

    return trace.build_parser()


def _trace(argv: Sequence[str]) -> int:
    from vtop.cli import trace

    return trace.main(argv)


def _whatif_parser() -> argparse.ArgumentParser:
    from vtop.cli import whatif

    return whatif.build_parser()


def _whatif(argv: Sequence[str]) -> int:
    from vtop.cli import whatif

    return whatif.main(argv)


def _completion_parser() -> argparse.ArgumentParser:
    from vtop.cli import completion

    return completion.build_parser()


def _completion(argv: Sequence[str]) -> int:
    from vtop.cli import completion

    return completion.main(argv)


COMMANDS: dict[str, Command] = {
    "sim": Command(
        "serve a simulated vLLM server (a scheduler twin) on loopback", _sim_parser, _sim
    ),
    "rules": Command("list, check, test and export the rules", _rules_parser, _rules),
    "trace": Command("inspect recorded traces", _trace_parser, _trace),
    "whatif": Command(
        "predict a server's figures after a knob change (a twin fitted to a trace)",
        _whatif_parser,
        _whatif,
    ),
    "completion": Command("print a shell completion script", _completion_parser, _completion),
}


def main(argv: Sequence[str] | None = None) -> int:
    """`vtop ARGV`; returns the process's exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    # A source's warnings (a GPU lost mid-run) reach stderr through logging's last-resort
    # handler, which looks stderr up at each write (so the TUI's capture still holds them);
    # they carry the same `vtop:` prefix as every other message of ours.
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(logging.Formatter("vtop: %(message)s"))
    command = COMMANDS.get(words[0]) if words else None
    if command is not None:
        return command.run(words[1:])
    from vtop.cli.monitor import build_parser, run_monitor

    exits = Exits.for_argv(words)
    args = build_parser(exits.usage).parse_args(words)
    try:
        return run_monitor(args, exits)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
