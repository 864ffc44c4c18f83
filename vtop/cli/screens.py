"""The command line's screens: the live dashboard (recording or not) and the replay screen.

Which runs is the terminal's choice as much as the flags': `--record FILE` shows the dashboard
while it records only when stdout and stderr are a terminal, `--replay FILE` the replay (or,
with `--train`, the training) screen only when stdout is one; elsewhere those modes are
headless (`vtop.cli.headless`). In a browser session's app (`vtop --web`) stdout is
textual-serve's pipe, yet the replay is still a screen (`served`). Textual is imported only
when a screen is about to run, so the headless modes never load it. When a screen closes, what
it did is one line on stderr (what was recorded, the training score), as the headless modes
say it.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

from vtop import durations
from vtop.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_UNKNOWN, Exits
from vtop.cli.goals_args import goals_from
from vtop.cli.output import fail, say
from vtop.cli.sources import UsageError, make_source, recorded_sources
from vtop.monitor import Monitor
from vtop.sources.base import FrameSource, watching
from vtop.trace.recorder import Recorder
from vtop.triage.engine import Engine


def engine(args: argparse.Namespace, *, headless: bool = False) -> Engine:
    """Shipped rules, the user's rule directory, then --rules; bad rules are reported, skipped
    (the screens' rules, and a report's or `--once`'s). `headless`: a rule stopped while it is
    evaluated (`Engine.on_error`) is one line on stderr as it happens (a screen shows it)."""
    loaded = Engine.from_catalog([Path(d) for d in args.rules])
    for err in loaded.errors:
        say(f"rule skipped: {err}")
    if headless:
        loaded.on_error = lambda err: say(f"rule {err}")
    return loaded


def run_tui(
    source: FrameSource,
    args: argparse.Namespace,
    recorder: Recorder | None = None,
    exits: Exits | None = None,
) -> int:
    """The live dashboard (recording from its first poll with `recorder`); Textual is imported
    only here."""
    from vtop.ui.app import VtopApp

    exits = exits if exits is not None else Exits()
    capacity = max(3600, math.ceil(3600 / args.interval))  # an hour at the poll interval
    try:
        monitor = Monitor(capacity=capacity, engine=engine(args))
        app = VtopApp(
            source,
            monitor,
            interval=args.interval,
            theme=args.theme,
            recorder=recorder,
            goals=goals_from(args),
        )
    except ValueError as exc:
        if recorder is not None:
            recorder.close()
        return fail(str(exc), exits.usage)
    if recorder is not None:  # a disk that fills up says so on the screen, not under it
        recorder.notify = lambda message: app.notify(message, severity="error", timeout=10)
    monitor.engine.on_error = lambda err: app.notify(
        str(err), severity="warning", timeout=20, title="a rule stopped; the others run"
    )
    app.run()
    return app.return_code or EXIT_OK  # ExitCode.HANGUP: the terminal hung up (vtop.ui.driver)


def record_screen_wanted(args: argparse.Namespace) -> bool:
    """`--record FILE` on a terminal (stdout and stderr): the dashboard, recording (not with
    --headless, a report, --once, --duration or a replay, which stay headless or are usage
    errors there)."""
    return (
        bool(args.record)
        and not (args.headless or args.report or args.once or args.duration)
        and not (args.replay or args.train)
        and sys.stdout.isatty()
        and sys.stderr.isatty()  # Textual draws on stderr: `2>log` must not fill log with it
    )


def run_recording_tui(args: argparse.Namespace, exits: Exits) -> int:
    """The dashboard over the flags' source, recording every poll to `--record FILE`; after
    the screen closes, one line says what was recorded (as the headless recording does)."""
    from vtop.trace.writer import TraceWriteError

    try:
        source = make_source(args)
    except UsageError as exc:
        return fail(str(exc), exits.usage)
    try:
        recorder = Recorder(
            args.record, sources=recorded_sources(args, watching(source)), interval_s=args.interval
        )
    except TraceWriteError as exc:
        asyncio.run(source.aclose())
        return fail(str(exc), exits.usage)
    code = run_tui(source, args, recorder, exits)
    recorder.close()  # closed already when the screen ended; a second close does nothing
    if recorder.error is not None:  # said on the screen, which is gone now
        return fail(recorder.error, EXIT_FAILED)
    if code == EXIT_OK:
        say(f"recorded {recorder.polls} polls ({recorder.bytes / 1024:.1f} KiB) to {recorder.path}")
    return code


def replay_screen_wanted(args: argparse.Namespace) -> bool:
    """`--replay FILE` (and `--train`) on a terminal get the screen; a pipe gets the text quiz,
    or the usage error that says to add --report."""
    return (
        bool(args.replay)
        and not (args.report or args.record or args.once)
        and (sys.stdout.isatty() or served())
    )


def served() -> bool:
    """True in the app process of a browser session (`vtop --web`): textual-serve names
    Textual's web driver in `TEXTUAL_DRIVER`, and stdout is its pipe, not a terminal, yet a
    screen is what is wanted (and any TEXTUAL_DRIVER a user sets asks for one as much)."""
    return bool(os.environ.get("TEXTUAL_DRIVER"))


def run_replay_tui(args: argparse.Namespace, exits: Exits) -> int:
    """The replay (or training) screen; Textual is imported only here."""
    from vtop.cli import shipped_traces as shipped
    from vtop.sources.replay import ReplaySource
    from vtop.trace.reader import TraceError, TraceReader

    if args.url or args.demo:
        return fail("give one of --url, --demo or --replay", exits.usage)
    if not 1.0 <= args.speed <= 1000.0:
        return fail("--speed of a replay goes from 1 to 1000", exits.usage)
    pending: list[str] = []
    shown: list[Callable[[str], None]] = []

    def warn(message: str) -> None:  # the screen, once it runs; never stderr under it
        (shown[0] if shown else pending.append)(message)

    try:
        reader = TraceReader(shipped.resolve(args.replay), warn=warn)
    except TraceError as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    try:
        start, end = durations.window(args.from_, args.to, reader.start, reader.end)
    except ValueError as exc:
        reader.close()
        return fail(str(exc), exits.usage)
    from vtop.ui.replay_app import ReplayApp

    source = ReplaySource(reader, speed=args.speed, start=start, end=end, playing=not args.train)
    capacity = max(3600, math.ceil(3600 / (reader.header.interval_s or 1.0)))
    try:
        app = ReplayApp(
            source,
            engine(args),
            train=args.train,
            theme=args.theme,
            capacity=capacity,
            warnings=pending,
            goals=goals_from(args),
        )
    except ValueError as exc:
        reader.close()
        return fail(str(exc), exits.usage)
    shown.append(lambda message: app.notify(message, severity="warning", timeout=10))
    app.run()
    if app.return_code:  # the terminal hung up: nothing to print to
        return app.return_code
    if app.session is not None:
        print(f"vtop: training on {reader.name}: {app.session.score.summary()}")
    return EXIT_OK
