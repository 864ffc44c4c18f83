"""The monitor: the command line without a command word, whose flags choose the mode.

    vtop --url URL                  the live dashboard (`vtop.cli.screens`)
    vtop --url URL --once           two polls, one JSON document on stdout
    vtop --url URL --report         a verdict, exit 0/1/2/3 (`vtop.cli.headless`)
    vtop --demo --record FILE       the dashboard, recording (headless without a terminal)
    vtop --replay FILE [--train]    the replay screen, or `--report` / the text quiz headless
    vtop --demo --web 6006          the dashboard (or replay) in browsers (`vtop.cli.web`)

`--replay FILE` (with or without `--train`) opens the replay screen when stdout is a terminal;
elsewhere it is headless: `--report`, or the text quiz for `--train` on a pipe. `--record FILE`
likewise shows the dashboard while it records when stdout is a terminal (`q` ends both, `r`
stops the recording and goes on watching); it records headless, until Ctrl-C, where there is
no terminal, with `--headless`, or with `--duration` (a timed capture is a script's).

Errors the user can fix are one line on stderr, never a traceback, with the code `Exits` gives:
a usage error exits 2, or 3 (UNKNOWN) when `--report` is on the command line; nothing could be
read exits 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from vtop import __version__, untrusted
from vtop.cli import (
    config,
    connection_args,
    goals_args,
    headless,
    prometheus_args,
    ranges,
    targets_args,
    web,
)
from vtop.cli.actions import VersionAction
from vtop.cli.dispatch import COMMANDS
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE, Exits
from vtop.cli.output import fail
from vtop.cli.screens import (
    engine,
    record_screen_wanted,
    replay_screen_wanted,
    run_recording_tui,
    run_replay_tui,
    run_tui,
)
from vtop.cli.sources import UsageError, make_source
from vtop.cli.usage import OneLineParser
from vtop.monitor import Monitor
from vtop.sources.base import FrameSource, real_time, watching
from vtop.sources.sim import DEFAULT_SCENARIO
from vtop.triage.engine import Engine


def _description() -> str:
    """The help's first lines, the sub-commands named from the dispatcher's table (`COMMANDS`),
    so a new command cannot be runnable and missing from `vtop --help` (as `whatif` was)."""
    return (
        f"Monitor and triage vLLM servers. Sub-commands: {', '.join(COMMANDS)} "
        "(vtop COMMAND --help)."
    )


def build_parser(exit_code: int = EXIT_USAGE) -> argparse.ArgumentParser:
    """The monitor's arguments; a usage error is one line and exits `exit_code`."""
    parser = OneLineParser(prog="vtop", description=_description())
    parser.add_argument("--version", action=VersionAction)
    src = parser.add_argument_group("what to watch")
    src.add_argument(
        "--url",
        action="append",
        default=[],
        metavar="URL",
        help="vLLM server base URL (repeatable), e.g. http://localhost:8000",
    )
    targets_args.add_arguments(src)
    prometheus_args.add_arguments(src)
    src.add_argument(
        "--interval",
        type=ranges.INTERVAL,
        default=1.0,
        metavar="SECONDS",
        help=ranges.ranged("poll interval (default 1 s)", ranges.INTERVAL),
    )
    connection_args.add_connection(src)
    src.add_argument(
        "--demo",
        nargs="?",
        const=DEFAULT_SCENARIO,
        metavar="SCENARIO",
        help=f"watch a built-in simulated vLLM (default scenario {DEFAULT_SCENARIO}; "
        "`vtop sim --list` names them)",
    )
    src.add_argument(
        "--speed",
        type=ranges.SPEED,
        default=1.0,
        help=ranges.ranged(
            "simulated seconds per second with --demo; a replay's starting speed", ranges.SPEED
        ),
    )
    src.add_argument(
        "--seed",
        type=ranges.SEED,
        default=0,
        help=ranges.ranged("random seed of the simulation", ranges.SEED),
    )
    knobs = parser.add_argument_group("configuration the server does not expose")
    connection_args.add_knobs(knobs)
    goals_args.add_goals(parser.add_argument_group("goals of the advice"))
    config.add_argument(parser.add_argument_group("config file"))
    triage = parser.add_argument_group("triage")
    triage.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="DIR",
        help="extra rule directory (repeatable); its rules replace shipped ones by id",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--theme", default="dark", metavar="NAME", help="dark (default), light, or a Textual theme"
    )
    out.add_argument(
        "--once",
        action="store_true",
        help="poll twice, one interval apart, print one JSON document and exit",
    )
    out.add_argument(
        "--web",
        type=web.address,
        metavar="[HOST:]PORT",
        help="serve the dashboard (or a replay) to browsers on 127.0.0.1:PORT, or HOST:PORT "
        "(0.0.0.0: every address); prints the URL to open, with its secret token, once "
        "(docs/security.md)",
    )
    out.add_argument(
        "--headless",
        action="store_true",
        help="with --record: record without the dashboard even on a terminal, until Ctrl-C "
        "(without a terminal it always is)",
    )
    headless.add_arguments(parser)
    parser.exit_code = exit_code
    return parser


DEMO_ONCE_POLLS = 300
"""`--demo --once` watches five simulated minutes: virtual time is free, window statistics
over two polls would hide symptoms that come in bursts (preemptions, waves), and the rules
need a few minutes of history before they may speak."""


async def once(
    source: FrameSource, interval: float, polls: int, rules: Engine | None = None
) -> dict[str, object]:
    """`--once`: `polls` polls (an interval apart where the source reads the servers as they
    are now), as one JSON-ready document."""
    from vtop import summary

    monitor = Monitor(capacity=max(16, polls), engine=rules)
    try:
        for i in range(polls):
            if i and real_time(source):
                await asyncio.sleep(interval)
            monitor.feed(await source.poll())
    finally:
        await source.aclose()
    return {
        "vtop": __version__,
        "t": monitor.t,
        "endpoints": [summary.endpoint(v, nvml=monitor.gpu) for v in monitor.endpoints.values()],
        "gpu": summary.gpus(monitor.gpu),
    }


def run_monitor(args: argparse.Namespace, exits: Exits, words: Sequence[str] = ()) -> int:
    """Run the mode the flags choose; an error is one line, its code `exits`'. `words` are
    the command line's, which `--web` runs again for each browser session (less itself)."""
    if args.headless and not args.record:
        return fail(
            "--headless goes with --record FILE (it records without the dashboard)", exits.usage
        )
    problem = headless.wait_for_problem(args)
    if problem is not None:
        return fail(problem, exits.usage)
    if args.once and (args.report or args.record or args.replay):
        return fail(
            "--once prints one snapshot of a live or simulated server; it does not go "
            "with --report, --record or --replay",
            exits.usage,
        )
    if args.web is not None:
        return web.run(args, words, exits)
    if replay_screen_wanted(args):
        return run_replay_tui(args, exits)
    if record_screen_wanted(args):
        return run_recording_tui(args, exits)
    if headless.wanted(args) and not args.once:
        return _headless(args, exits)
    try:
        source = make_source(args)
    except UsageError as exc:
        return fail(str(exc), exits.usage)
    if args.once:
        polls = DEMO_ONCE_POLLS if args.demo else 2
        doc = asyncio.run(once(source, args.interval, polls, engine(args, headless=True)))
        print(json.dumps(untrusted.tree(doc), indent=2, sort_keys=False))  # no bidi either
        endpoints = doc["endpoints"]
        assert isinstance(endpoints, list)
        return EXIT_OK if any(e["status"] == "ok" for e in endpoints) else EXIT_UNKNOWN
    return run_tui(source, args, exits=exits)


def _headless(args: argparse.Namespace, exits: Exits) -> int:
    """--report, --record, --replay … --report: `vtop.cli.headless` runs them."""
    rules = engine(args, headless=True) if args.report else None  # the rules, --rules included
    if args.replay:
        return headless.run(args, None, [], rules, exits)
    try:
        source = make_source(args)
    except UsageError as exc:
        return fail(str(exc), exits.usage)
    return headless.run(args, source, watching(source), rules, exits)
