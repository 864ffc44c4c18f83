"""The headless modes of the command line: `--report`, `--record` and `--replay … --report`.

The monitor's parser (`vtop.cli.monitor`) takes this module's argument group, and runs the
modes it selects through `run()`. The work itself is below the command line: `vtop.report.run`
watches a source, replays a trace or runs the simulator into a document, `vtop.report` renders
it, `vtop.trace.recorder` writes the recording; this module turns arguments into those calls,
says what happened on stderr, and picks the exit code (`vtop.cli.exits`). Nothing here imports
Textual: a report or a recording in a script, a cron job or CI never loads the TUI.

Signals: SIGINT, SIGTERM and SIGHUP (an SSH session dropping) end a live report early (it covers
what was watched) and close a recording cleanly, footer included. Errors a user can fix are one
line on stderr: exit 3 (UNKNOWN) when nothing could be read; a usage error, or a report that
cannot be written, exits 2, or 3 under --report (vtop/cli/exits.py says why). A live report
whose targets refuse every connection from the start ends after `STARTUP_S` (nothing listens:
a wrong port, a server not started) instead of polling a closed port for its whole window;
`--wait-for` gives a server being started that long to come up (`vtop.report.run.Startup`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from vtop import durations
from vtop.cli import outfile, ranges
from vtop.cli import shipped_traces as shipped
from vtop.cli.actions import SchemaAction
from vtop.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_UNKNOWN, Exits
from vtop.cli.goals_args import goals_from
from vtop.cli.output import fail, say, warning, write_stdout
from vtop.model import Frame
from vtop.report import FORMATS, render
from vtop.report.document import Document
from vtop.report.run import STARTUP_S, Startup
from vtop.sources.base import FrameSource, Simulated, simulated
from vtop.trace import TraceError, TraceReader, TraceWriteError
from vtop.trace.recorder import Recorder
from vtop.triage.engine import Engine

DEFAULT_REPORT_S = 30.0
DEFAULT_DEMO_S = 300.0
"""A simulated window costs no waiting, and most rules want minutes of evidence."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("record, replay, report")
    group.add_argument(
        "--record",
        metavar="FILE",
        help="record every poll to FILE: beside the dashboard on a terminal; without a "
        "screen where there is none, or with --headless, --duration or --report",
    )
    group.add_argument(
        "--replay",
        metavar="FILE",
        help="replay a recorded trace: a file, or a shipped one by name (vtop trace list)",
    )
    group.add_argument(
        "--train",
        action="store_true",
        help="with --replay: findings hidden; at each incident name the diagnosis and the "
        "knob change, then see the answer; a score at the end",
    )
    group.add_argument(
        "--report",
        action="store_true",
        help="no screen: watch (or read the trace), print a verdict, exit 0/1/2/3",
    )
    group.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        dest="report_format",
        help="report format (default text)",
    )
    group.add_argument(
        "--duration",
        metavar="TIME",
        type=ranges.WATCH,
        help=ranges.ranged(
            "how long to watch: 30s, 5m, 1h30m (report default 30 s, 5 min of "
            "simulated time with --demo, which runs it flat out; a recording "
            "runs until stopped)",
            ranges.WATCH,
        ),
    )
    group.add_argument(
        "--wait-for",
        metavar="TIME",
        type=ranges.WATCH,
        help=ranges.ranged(
            "with --report on a live server: wait this long for it to answer (a server just "
            "started) before the report's --duration begins; without it a report on a port "
            f"where nothing listens ends after {STARTUP_S:g} s, exit 3",
            ranges.WATCH,
        ),
    )
    group.add_argument(
        "--from",
        dest="from_",
        metavar="WHEN",
        help="replay from: +5m after the trace's start, -10m before its end (write "
        "--from=-10m), "
        "15:04[:05] or an ISO time (UTC unless it says otherwise)",
    )
    group.add_argument("--to", metavar="WHEN", help="replay until (same forms as --from)")
    group.add_argument(
        "--fail-on",
        choices=("warning", "critical"),
        default="warning",
        help="lowest status that makes the exit code non-zero (default warning)",
    )
    group.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE")
    group.add_argument(
        "--schema",
        action=SchemaAction,
        help="print the JSON schema of --format json reports (report_version 1) and exit",
    )


def wanted(args: argparse.Namespace) -> bool:
    """True when the arguments select a mode this module runs."""
    return bool(args.report or args.record or args.replay or args.train)


def _notify_monitoring(message: str) -> None:
    say(f"{message}; monitoring continues")


def _signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


@contextlib.contextmanager
def _stopping() -> Iterator[threading.Event]:
    """An event SIGINT, SIGTERM or SIGHUP sets, for a loop that runs without asyncio (the
    simulator flat out): it ends at its next poll with what it has. A second Ctrl-C interrupts
    at once, as the default handler would; the handlers are put back on leaving."""
    stop = threading.Event()
    previous: dict[int, Any] = {}

    def handle(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread: no handler
            previous[sig] = signal.signal(sig, handle)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def wait_for_problem(args: argparse.Namespace) -> str | None:
    """--wait-for where nothing would wait: it holds a live report's window, nothing else."""
    if args.wait_for is None:
        return None
    if not args.report or args.demo or args.replay or args.once:
        return "--wait-for goes with --report on a live server (--url, --targets, --discover)"
    return None


def _emit(
    doc: Document, args: argparse.Namespace, exits: Exits, startup: Startup | None = None
) -> int:
    text = render(doc, args.report_format)
    if args.output:
        problem = outfile.write(args.output, text)  # whole or not at all: the old file stays
        if problem is not None:
            return fail(problem, exits.usage)
    else:
        write_stdout(text)
    # Nothing could be read: one line on stderr too. A warning still being judged is no error:
    # the report says what it waits for (`no verdict yet: …`).
    # A report that gave up on targets where nothing listens says that, and nothing else.
    if startup is not None and startup.gave_up:
        say(startup.line)
        return EXIT_UNKNOWN
    undecided = any(f["state"] in ("pending", "insufficient") for f in doc["findings"])
    if doc["status"] == "UNKNOWN" and not undecided:
        say(f"UNKNOWN: {doc['reason']}")
    return exits.verdict(doc["status"], args.fail_on)


def _usage_problem(args: argparse.Namespace) -> str | None:
    if (args.from_ or args.to) and not args.replay:
        return "--from/--to select part of a trace; use them with --replay FILE"
    if args.train and (not args.replay or args.report or args.record):
        return "--train goes with --replay FILE alone: it quizzes on a recorded incident"
    if args.replay and not args.train:
        if args.record:
            return "--record records a live or simulated server; a replay has nothing new"
        if args.url or args.demo:
            return "give one of --url, --demo or --replay"
        if not args.report:
            return "the replay screen needs a terminal; add --report for a verdict"
    return None


def _output_problem(args: argparse.Namespace) -> str | None:
    """-o naming a file this run reads or records (it would be replaced by the report)."""
    if not args.output:
        return None
    inputs = {
        "the trace being replayed": [args.replay],
        "the trace being recorded": [args.record],
        "a targets file": args.targets,
        "a rules file": outfile.rules_read(args.rules),
        "the CA certificates of --ca-cert": [getattr(args, "ca_cert", None)],
    }
    return outfile.conflict(args.output, inputs)


def run(
    args: argparse.Namespace,
    source: FrameSource | None,
    names: list[str],
    engine: Engine | None,
    exits: Exits,
    *,
    recorded: Sequence[str] = (),
) -> int:
    """Run the mode the arguments select. `source` is the live or simulated one (None with
    --replay); `names` name its endpoints (URLs without secrets) or its scenario; `engine`
    the rules a report runs (the shipped catalog when None); `exits` the command line's exit
    codes; `recorded` what a recording's header says it recorded (`recorded_sources`)."""
    try:
        duration = durations.parse(args.duration) if args.duration else None
    except ValueError as exc:
        return _closing(source, fail(f"--duration: {exc}", exits.usage))
    if duration is not None and duration <= 0:
        return _closing(source, fail("--duration must be positive", exits.usage))
    problem = _usage_problem(args) or wait_for_problem(args)
    if problem is None and args.replay:
        try:  # a shipped trace's name becomes its file before -o is compared with it
            args.replay = shipped.resolve(args.replay)
        except TraceError as exc:
            return _closing(source, fail(str(exc), EXIT_UNKNOWN))
    problem = problem or _output_problem(args)
    if problem is not None:
        return _closing(source, fail(problem, exits.usage))
    if args.train:
        from vtop.cli import train

        return train.run(args.replay, goals=goals_from(args))
    if args.replay:
        return _report_replay(args, exits, engine)
    assert source is not None
    recorder = None
    if args.record:
        try:
            recorder = Recorder(
                args.record,
                sources=list(recorded),
                interval_s=args.interval,
                notify=_notify_monitoring if args.report else say,
            )
        except TraceWriteError as exc:
            return _closing(source, fail(str(exc), exits.usage))
    try:
        sim = simulated(source)
        if sim is not None and (args.report or duration is not None):
            return _demo(args, sim, recorder, duration, names, exits, engine)
        if args.report:
            report = _report_live(args, source, recorder, duration, names, exits, engine)
            return asyncio.run(report)
        assert recorder is not None
        return asyncio.run(_record(args, source, recorder, duration))
    finally:
        if recorder is not None:
            recorder.close()


def _closing(source: FrameSource | None, code: int) -> int:
    if source is not None:
        asyncio.run(source.aclose())
    return code


def _demo(
    args: argparse.Namespace,
    source: Simulated,
    recorder: Recorder | None,
    duration: float | None,
    names: list[str],
    exits: Exits,
    engine: Engine | None = None,
) -> int:
    """The simulator in virtual time, flat out: a report, a recording of a set length, or both."""
    from vtop.report.run import simulated_document

    window = duration or DEFAULT_DEMO_S
    with _stopping() as stop:
        doc = simulated_document(
            source,
            name=" ".join(names),
            duration_s=window,
            on_frame=recorder.feed if recorder else None,
            engine=engine,
            stop=stop,
            goals=goals_from(args),
        )
    if recorder is not None and not args.report:
        recorder.close()
        if recorder.error:
            return EXIT_FAILED
        say(
            f"recorded {recorder.polls} polls ({durations.span(window)} of simulated time, "
            f"{recorder.bytes / 1024:.1f} KiB) to {recorder.path}"
        )
        return EXIT_OK
    return _emit(doc, args, exits)


def _wait_s(wait_for: str | None, window: float) -> float:
    """How long a report waits for targets that refuse every connection: `--wait-for` (its
    range checked by the parser), else `STARTUP_S`, or the window itself if that is shorter
    (a report asked for 1 s does not wait 3)."""
    return durations.parse(wait_for) if wait_for else min(STARTUP_S, window)


async def _report_live(
    args: argparse.Namespace,
    source: FrameSource,
    recorder: Recorder | None,
    duration: float | None,
    urls: list[str],
    exits: Exits,
    engine: Engine | None = None,
) -> int:
    from vtop.report.run import live_document

    stop = asyncio.Event()
    _signals(stop)
    on_frame = recorder.feed if recorder is not None else None
    window = duration or DEFAULT_REPORT_S
    startup = Startup(_wait_s(args.wait_for, window))
    try:
        doc = await live_document(
            source,
            name=" ".join(urls),
            interval_s=args.interval,
            duration_s=window,
            on_frame=on_frame,
            stop=stop,
            engine=engine,
            startup=startup,
            goals=goals_from(args),
        )
    finally:
        await source.aclose()
    return _emit(doc, args, exits, startup)


async def _record(
    args: argparse.Namespace, source: FrameSource, recorder: Recorder, duration: float | None
) -> int:
    from vtop.report.run import watch

    stop = asyncio.Event()
    _signals(stop)
    first: list[float] = []

    def take(frame: Frame) -> None:
        if not first:
            first.append(frame.t)
        recorder.feed(frame)
        if not recorder.active:
            stop.set()

    until = f"for {durations.span(duration)}" if duration else "until Ctrl-C"
    say(f"recording to {recorder.path} every {args.interval:g} s {until}")
    try:
        await watch(source, args.interval, take, duration_s=duration, stop=stop)
    finally:
        await source.aclose()
        recorder.close()
    if recorder.error:
        return EXIT_FAILED
    say(f"recorded {recorder.polls} polls ({recorder.bytes / 1024:.1f} KiB) to {recorder.path}")
    return EXIT_OK


def _report_replay(args: argparse.Namespace, exits: Exits, engine: Engine | None = None) -> int:
    from vtop.report.run import replay_document

    def resolve(reader: TraceReader) -> tuple[float | None, float | None]:
        return durations.window(args.from_, args.to, reader.start, reader.end)

    try:
        doc = replay_document(
            args.replay, resolve=resolve, engine=engine, warn=warning, goals=goals_from(args)
        )
    except TraceError as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    except ValueError as exc:
        return fail(str(exc), exits.usage)
    return _emit(doc, args, exits)
