"""`vtop tune`: apply the twin's choice to a server vtop may restart, and prove it by measuring.

    vtop tune --url http://gpu:8000 --restart 'systemctl restart vllm' --flags-file /etc/vllm/flags
    vtop tune -- vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 16

The first form writes each change into the flags file the server starts with and runs the
restart command; the second launches the command line after `--` itself and restarts it with
the changed flags (it keeps running when tune ends, with the best flags found). Each trial
watches `--watch` (a report's window), after the server answers and its load is back; the user's
own load is the load, or with `--load N` vtop's own closed-loop clients (`vtop.tune.load`).
Before each restart the plan is shown and asked for,
unless `--yes`. Every trial goes to a JSON log and a Markdown table beside it. The loop is
`vtop.tune.loop`; this module parses, builds the parts and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from vtop import __version__, durations, files
from vtop.cli import connection_args, goals_args, ranges
from vtop.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.output import fail
from vtop.cli.sources import SourceSpec, UsageError, make_source, scrape_options
from vtop.cli.usage import OneLineParser
from vtop.report.document import Document
from vtop.report.run import Startup, live_document
from vtop.tune.load import Load, LoadShape, parse_shape
from vtop.tune.loop import Outcome, Plan, Trial, Tuner
from vtop.tune.server import CommandServer, LaunchedServer, RestartError, Server
from vtop.whatif.advice import Advisor
from vtop.whatif.goals import Goals

DEFAULT_WATCH = "45s"
DEFAULT_WAIT = "10m"
DEFAULT_SETTLE = "15s"
LOAD_CHECK_S = 3.0
"""Each look for the load after a restart: the server must show a request running or waiting."""
PREDICT_BUDGET_S = 60.0
"""Time each trial's report may spend predicting and searching (a report's own is 6 s): a
restart costs a minute, and `--load`'s clients run in this process beside the twin. With the
report's budget, a 2-core host running the server and 24 clients cut the search after its
first configuration, and tune stopped, expecting no change to meet the goals."""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="vtop tune",
        description="Restart a server with the twin's choice, measure it, keep the best.",
    )
    parser.add_argument(
        "--url",
        metavar="URL",
        help="the server to watch (default with a launched server: "
        "http://127.0.0.1:PORT, PORT its --port or 8000)",
    )
    parser.add_argument(
        "--restart",
        metavar="COMMAND",
        help="the shell command that restarts the server (with --flags-file)",
    )
    parser.add_argument(
        "--flags-file",
        metavar="FILE",
        help="the file of vllm serve flags the server starts with: vtop "
        "writes each change into it before --restart",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="restart without asking (default: ask before each restart)",
    )
    parser.add_argument(
        "--watch",
        metavar="DURATION",
        type=ranges.TUNE_WATCH,
        default=DEFAULT_WATCH,
        help=ranges.ranged(f"each trial's window (default {DEFAULT_WATCH})", ranges.TUNE_WATCH),
    )
    parser.add_argument(
        "--settle",
        metavar="DURATION",
        type=ranges.TUNE_SETTLE,
        default=DEFAULT_SETTLE,
        help=ranges.ranged(
            "how long the load runs on a (re)started server before its window "
            f"(default {DEFAULT_SETTLE})",
            ranges.TUNE_SETTLE,
        ),
    )
    parser.add_argument(
        "--wait",
        metavar="DURATION",
        type=ranges.TUNE_WAIT,
        default=DEFAULT_WAIT,
        help=ranges.ranged(
            "how long a restarted server may take to answer, "
            f"then to get its load back (default {DEFAULT_WAIT})",
            ranges.TUNE_WAIT,
        ),
    )
    parser.add_argument(
        "--max-restarts",
        metavar="N",
        type=ranges.RESTARTS,
        default=3,
        help=ranges.ranged(
            "trials at most; restoring the best after a worse one is one restart more (default 3)",
            ranges.RESTARTS,
        ),
    )
    parser.add_argument(
        "--interval",
        metavar="SECONDS",
        type=ranges.INTERVAL,
        default=1.0,
        help=ranges.ranged("poll interval (default 1 s)", ranges.INTERVAL),
    )
    parser.add_argument(
        "--log",
        metavar="FILE",
        help="the trials as JSON (and FILE.md as a Markdown table beside it; "
        "default: vtop-tune-TIME.json here)",
    )
    load = parser.add_argument_group("load (default: none; the server's own clients are the load)")
    load.add_argument(
        "--load",
        metavar="N",
        type=ranges.LOAD_CLIENTS,
        help=ranges.ranged(
            "send a closed-loop load of N clients through every trial", ranges.LOAD_CLIENTS
        ),
    )
    load.add_argument(
        "--load-shape",
        metavar="PROMPT:OUTPUT",
        type=_shape,
        help="tokens per prompt and per answer (default: the shape of the requests the "
        "server has served, else 256:128)",
    )
    goals_args.add_goals(parser.add_argument_group("goals"), what="the choice")
    connection_args.add_connection(parser.add_argument_group("connection"))
    parser.add_argument(
        "server",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="a server for vtop to launch and restart itself",
    )
    return parser


def main(argv: Sequence[str]) -> int:
    """`vtop tune …` (the words after `tune`); returns the exit code."""
    args = build_parser().parse_args(list(argv))
    command = args.server[1:] if args.server[:1] == ["--"] else args.server
    launched = bool(command)
    if launched and (args.restart or args.flags_file):
        return fail(
            "vtop tune: give --restart and --flags-file, or a command after --, not both",
            EXIT_USAGE,
        )
    if not launched and not (args.url and args.restart and args.flags_file):
        return fail(
            "vtop tune: nothing vtop may restart: give --url, --restart COMMAND and "
            "--flags-file FILE, or the server's command line after --",
            EXIT_USAGE,
        )
    if args.load_shape is not None and args.load is None:
        return fail("vtop tune: --load-shape shapes --load N: give both", EXIT_USAGE)
    url = args.url or f"http://127.0.0.1:{_port(command)}"
    log = Path(args.log or time.strftime("vtop-tune-%Y%m%d-%H%M%S.json", time.gmtime()))
    goals = goals_args.goals_from(args)
    spec = SourceSpec.from_args(args, urls=[url])
    try:
        checked = make_source(spec)  # the URL and flags, now
        asyncio.run(checked.aclose())  # each watch makes its own (`_watch`)
        server: Server = (
            LaunchedServer(command, log.with_suffix(".server.log"))
            if launched
            else CommandServer(args.restart, args.flags_file)
        )
    except UsageError as exc:
        return fail(f"{exc}", EXIT_USAGE)
    except RestartError as exc:
        return fail(f"{exc}", EXIT_UNKNOWN)
    out = sys.stdout
    out.write(f"vtop tune: {url}, goals: {goals.describe()}\n  now: {server.describe()}\n")

    def say(line: str) -> None:
        print(f"  {line}", file=out, flush=True)

    load = (
        Load(url, args.load, args.load_shape, scrape_options(spec), say)
        if args.load is not None
        else None
    )
    progress = Progress(out)
    tuner = Tuner(
        server,
        _observer(spec, args, goals, server, load),
        goals,
        max_restarts=args.max_restarts,
        confirm=(lambda plan: True) if args.yes else _asker(sys.stdin, out),
        on_trial=progress.row,
        say=say,
    )
    code = EXIT_OK
    try:
        tuner.run()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except RestartError as exc:
        tuner.outcome.stopped = str(exc)
        code = EXIT_UNKNOWN
    finally:
        if load is not None:
            load.stop()
    _finish(tuner.outcome, server, url, goals, log, out)
    return code


def _shape(text: str) -> LoadShape:
    try:
        return parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(command: Sequence[str]) -> str:
    """The `--port` of a launched command line, else vLLM's default 8000."""
    for i, token in enumerate(command):
        if token == "--port" and i + 1 < len(command):
            return command[i + 1]
        if token.startswith("--port="):
            return token.split("=", 1)[1]
    return "8000"


def _observer(
    spec: SourceSpec, args: argparse.Namespace, goals: Goals, server: Server, load: Load | None
) -> Callable[[Goals], Document]:
    """One trial's watch: wait for the server to answer (then start `--load`, once) and for a
    request to show on it (within `--wait`), then the `--watch` window, as a report of it."""
    url = spec.urls[0]
    watch_s = durations.parse(args.watch)
    wait_s = durations.parse(args.wait)
    settle_s = durations.parse(args.settle)
    # one for every trial (each fit sees the steps of the ones before), with time to search
    advisor = Advisor(goals, budget_s=PREDICT_BUDGET_S)

    async def observe(goals: Goals) -> Document:
        advisor.goals = goals
        startup = Startup(wait_s)
        deadline = time.monotonic() + wait_s
        while True:
            doc = await _watch(spec, LOAD_CHECK_S, goals, startup, server)
            if startup.gave_up:
                raise RestartError(f"nothing answers at {url} after {durations.span(wait_s)}")
            if load is not None:
                load.ensure_started()
            if _loaded(doc):
                break
            if time.monotonic() > deadline:
                raise RestartError(
                    f"no request reached {url} in {durations.span(wait_s)}: "
                    + (
                        f"the load's requests fail: {load.last_error()}"
                        if load is not None
                        else "tune measures the server's own load; start it, or give --load N"
                    )
                )
        await _settle(settle_s, server)  # a restarted server's first seconds are not steady
        return await _watch(spec, watch_s, goals, None, server, advisor)

    return lambda goals: asyncio.run(observe(goals))


async def _settle(seconds: float, server: Server) -> None:
    """Let the load run `seconds` on the server unwatched (no poll, no report: the window
    that follows is measured on a quiet host); a launched server that exits meanwhile ends it,
    and the watch after says so."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if isinstance(server, LaunchedServer) and server.exited() is not None:
            return
        await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


async def _watch(
    spec: SourceSpec,
    duration_s: float,
    goals: Goals,
    startup: Startup | None,
    server: Server,
    advisor: Advisor | None = None,
) -> Document:
    """A live report over `duration_s`, ended early when a launched server exits. A fresh
    source each time: a source reads the server's knobs (its process, its page) once, at its
    first poll, and a restarted server has new ones."""
    source = make_source(spec)
    stop = asyncio.Event()

    async def guard() -> None:
        while not stop.is_set():
            if isinstance(server, LaunchedServer) and server.exited() is not None:
                stop.set()
            await asyncio.sleep(0.5)

    task = asyncio.create_task(guard())
    try:
        doc = await live_document(
            source,
            name=spec.urls[0],
            interval_s=spec.interval,
            duration_s=duration_s,
            stop=stop,
            startup=startup,
            goals=goals,
            advisor=advisor,
        )
    finally:
        stop.set()
        await task
        await source.aclose()
    if isinstance(server, LaunchedServer) and (code := server.exited()) is not None:
        raise RestartError(f"the server exited with code {code}; its output: {server.log}")
    return doc


def _loaded(doc: Document) -> bool:
    signals = doc["signals"]
    if "running" not in signals:
        return False
    return any((signals[name]["max"] or 0) > 0 for name in ("running", "waiting"))


def _asker(inp: TextIO, out: TextIO) -> Callable[[Plan], bool]:
    def confirm(plan: Plan) -> bool:
        why = f" ({plan.unchecked})" if plan.unchecked else ""
        out.write(
            f"\n  {plan.rule}: restart with {plan.flags()}{why}\n"
            f"    predicted: {plan.line}\n  restart now? [y/N] "
        )
        out.flush()
        answer = inp.readline()
        return answer.strip().lower() in ("y", "yes")

    return confirm


class Progress:
    """The trials as a table, a row printed as each is measured."""

    HEAD = f"{'#':>2}  {'flags':<44} {'predicted':>10} {'measured':>10} {'error':>6}  verdict"

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = False

    def row(self, t: Trial) -> None:
        if not self.started:
            self.out.write(f"\n{self.HEAD}\n")
            self.started = True
        self.out.write(line(t) + "\n")
        self.out.flush()


def line(t: Trial) -> str:
    predicted = t.predicted.tokens_per_s if t.predicted else None
    error = t.error()
    err = "-" if error is None else f"{error:+.0%}"
    goals = "meets goals" if t.meets else "misses " + ", ".join(t.misses)
    return (
        f"{t.number:>2}  {t.flags():<44} {_tps(predicted):>10} "
        f"{_tps(t.measured.tokens_per_s):>10} {err:>6}  {t.verdict}; {goals}"
    )


def _tps(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def markdown(outcome: Outcome) -> str:
    rows = [
        "| # | flags | predicted tok/s | measured tok/s | error | preempt/s | TTFT p90 | "
        "ITL mean | verdict | goals |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in outcome.trials:
        m = t.measured
        error = t.error()
        rows.append(
            " | ".join(
                [
                    f"| {t.number}",
                    f"`{t.flags()}`",
                    _tps(t.predicted.tokens_per_s if t.predicted else None),
                    _tps(m.tokens_per_s),
                    "-" if error is None else f"{error:+.0%}",
                    "-" if m.preemptions_per_s is None else f"{m.preemptions_per_s:.2f}",
                    "-" if m.ttft_p90_s is None else f"{m.ttft_p90_s:.2f} s",
                    "-" if m.itl_mean_s is None else f"{m.itl_mean_s * 1000:.0f} ms",
                    t.verdict,
                    ("meets" if t.meets else "; ".join(t.misses)) + " |",
                ]
            )
        )
    return "\n".join(rows) + "\n"


def _finish(
    outcome: Outcome, server: Server, url: str, goals: Goals, log: Path, out: TextIO
) -> None:
    best = outcome.best
    doc = {
        "vtop": __version__,
        "url": url,
        "goals": goals.describe(),
        "stopped": outcome.stopped,
        "restarts": outcome.restarts,
        "best": best.number if best is not None else None,
        "trials": [t.as_json() for t in outcome.trials],
        "server": server.describe(),
        "server_pid": server.pid if isinstance(server, LaunchedServer) else None,
    }
    with contextlib.suppress(OSError):
        files.write_atomic(log, json.dumps(doc, indent=2) + "\n")
        files.write_atomic(log.with_suffix(".md"), markdown(outcome))
    out.write(f"\nstopped: {outcome.stopped or 'done'}\n")
    if best is not None:
        out.write(f"best: trial {best.number}, {best.flags()}: {best.measured.line()}\n")
    if isinstance(server, LaunchedServer) and server.exited() is None:
        out.write(
            f"the server keeps running as PID {server.pid}: {server.describe()}\n"
            f"  its output: {server.log}\n"
        )
    out.write(f"log: {log} and {log.with_suffix('.md')}\n")
