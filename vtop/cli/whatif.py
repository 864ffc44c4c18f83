"""`vtop whatif (--url URL | --replay FILE) --set max_num_seqs=32 [--sweep max_num_seqs=8,16]`.

The command line around the prediction wing (`vtop.whatif`): it parses the arguments, has the
server read, and prints what the wing answers. The server comes from one of two places:

- `--replay FILE` reads a recorded trace (`vtop.whatif.watched.read_trace`: the same frames
  the monitor and the report read).
- `--url URL` watches the server for `--duration` (30 s) with the monitor's own live source
  (`vtop.cli.sources.make_source`, from a `SourceSpec` of the URL, the interval and the
  connection flags) and poll loop (`vtop.report.run.watch`), feeding a
  `Monitor`: its store, the knobs it discovered and its GPU (`Monitor.watched`) are what a
  recording would have held. Ctrl-C ends the watch early and the twin is fitted to what was
  watched, if that is two polls or more. A server that does not answer the first poll is one
  line naming it at once, not a wait for the duration that ends in an empty fit.

Then one path (`run`): the wing fits and self-checks the twin over the last `--window` (at
most what was read), runs every configuration asked for (`--set`s are one configuration
together; each `--sweep` value is one more, on top of the `--set`s) and, for a sweep, chooses
the best row under the goals as a finding's search does (`vtop.whatif.sweep`; the goal flags
of `vtop.cli.goals_args`, as on every mode). This module prints one row per configuration:
what was observed, the twin at today's knobs, the prediction after each change (tokens/s and
ITL from the observed row, moved by the twin's change, as a report states them), `◀ best`
beside the chosen one. A twin the self-check rejects prints its reason instead of
predictions; a family of figures it finds off (occupancy, latency) prints "–" in the after
rows and a line saying why. `--format json` writes the same as one document (each predicted
figure as {now, after, low, high, seen}, each withheld one under `withheld` with its reason,
the goals and the best row), headed as a report's JSON is, by the same code
(`vtop.report.build`): the `vtop` that made it, its `source` and the `window` the twin was
fitted over, so a prediction kept beside a report says what it is of.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from vtop import __version__, durations, fmt
from vtop.cli import connection_args, goals_args, ranges, shipped_traces
from vtop.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.output import fail, say, warning, write_stdout
from vtop.cli.sources import SourceSpec, UsageError, make_source
from vtop.cli.usage import OneLineParser
from vtop.figures import FIGURE, GENERATION
from vtop.knobs import KnobValue
from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.report.build import families_doc, source_doc, window_doc
from vtop.report.document import SourceDoc
from vtop.report.run import watch
from vtop.signals.store import Store
from vtop.sources.base import FrameSource, watching
from vtop.sources.pacing import WARM_INTERVAL_S, WARM_UP_S
from vtop.trace.reader import TraceError, shown_name
from vtop.whatif import sweep
from vtop.whatif.advice import twin_failed
from vtop.whatif.check import FAMILIES, FIGURES
from vtop.whatif.goals import Goals
from vtop.whatif.predict import KNOB_FIELDS, Prediction, WhatIf, observe, prepare_from
from vtop.whatif.watched import Watched, read_trace

COLUMNS = tuple(
    FIGURE[name]
    for name in (
        "generation_tokens_per_s",
        "running",
        "waiting",
        "kv_usage",
        "preemptions_per_s",
        "queue_p50",
        "ttft_p50",
        "ttft_p90",
        "itl_p50",
        "itl_mean",
    )
)
"""The figures the table prints, headed by their what-if names (`vtop.figures`)."""
BEST_MARK = "◀ best"
DEFAULT_DURATION = "30s"
DEFAULT_INTERVAL_S = 1.0
"""How long `--url` watches, and how often it polls, when not told: the monitor's interval,
and half a minute, long enough for rates and a latency histogram to fill, short enough to
wait for at a prompt."""


class WatchError(Exception):
    """The server could not be watched enough to fit a twin; the message names it and says why."""


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="vtop whatif",
        description="Predict a server's figures after a knob change, from a twin fitted to it.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--url", metavar="URL", help="a vLLM server to watch for --duration, then predict"
    )
    source.add_argument("--replay", metavar="FILE", help="a trace of the server")
    parser.add_argument(
        "--duration",
        metavar="DURATION",
        type=ranges.WHATIF_WATCH,
        help=ranges.ranged(
            f"with --url: how long to watch (default {DEFAULT_DURATION}; Ctrl-C ends it early)",
            ranges.WHATIF_WATCH,
        ),
    )
    parser.add_argument(
        "--interval",
        type=ranges.INTERVAL,
        metavar="SECONDS",
        help=ranges.ranged(
            f"with --url: poll interval (default {DEFAULT_INTERVAL_S:g} s)", ranges.INTERVAL
        ),
    )
    live = parser.add_argument_group("with --url")
    connection_args.add_connection(live)
    connection_args.add_knobs(live)
    parser.add_argument(
        "--set",
        metavar="KNOB=VALUE",
        action="append",
        default=[],
        help=f"a changed knob (repeatable, applied together): {', '.join(KNOB_FIELDS)}",
    )
    parser.add_argument(
        "--sweep", metavar="KNOB=V1,V2,...", help="one configuration per value, each a row"
    )
    goals_args.add_goals(parser.add_argument_group("goals"), what="a --sweep's best row")
    parser.add_argument(
        "--window",
        metavar="DURATION",
        default="5m",
        type=ranges.WINDOW,
        help=ranges.ranged("fit to the last DURATION read (5m)", ranges.WINDOW),
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="a table (text) or JSON"
    )
    return parser


def _family_error(whatif: WhatIf) -> str:
    """`; occupancy off by 84% (waiting); latency off 84.9x (queue p50)` for the families
    beyond throughput that the self-check could judge."""
    parts = []
    for name, verdict in whatif.check.families.items():
        if name == "throughput" or verdict.worst is None or verdict.error is None:
            continue
        by = f"{verdict.error:.3g}x" if name == "latency" else fmt.pct(verdict.error)
        parts.append(f"; {name} off by {by} ({FIGURE[verdict.worst].brief})")
    return "".join(parts)


def _after(p: Prediction, name: str) -> float | None:
    """The figure after the change as a report states it (`Band.after`: for tokens/s and ITL
    the observed today times the twin's change), or the twin's own where no band is kept."""
    band = p.figures.get(name)
    return band.after if band is not None else p.twin_after.get(name)


def table(whatif: WhatIf, swept: sweep.Sweep, *, choose: bool = False) -> str:
    """Observed, twin today, twin after each configuration: one row each; "–" where a figure
    is withheld; with `choose` (a `--sweep`), the row the goals chose marked and a line that
    says which and under which goals, or why none."""
    check = whatif.check
    rows: list[list[str]] = [["", *(f.brief for f in COLUMNS), ""]]
    rows.append(["observed", *(f.screen(check.observed.get(f.name)) for f in COLUMNS), ""])
    rows.append(["twin today", *(f.screen(check.twin.get(f.name)) for f in COLUMNS), ""])
    chosen = swept.chosen if choose else None
    for t in swept.trials:
        p = t.prediction
        cells = [fmt.DASH if f.name in p.withheld else f.screen(_after(p, f.name)) for f in COLUMNS]
        rows.append([sweep.label(t), *cells, BEST_MARK if t is chosen else ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, len(r) - 1) else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    token_error = check.errors.get(GENERATION.name)
    head = [
        f"workload: {whatif.workload.loop} loop; {whatif.step.describe()}",
        f"self-check: {GENERATION.brief} off by {fmt.pct(token_error)}{_family_error(whatif)}; "
        f"confidence {check.confidence}",
    ]
    if check.withheld:
        head.append(f"predictions withheld: {check.reason}")
    else:
        for family in FAMILIES:
            verdict = check.families.get(family.name)
            if verdict is not None and verdict.withheld:
                named = ", ".join(f.brief for f in COLUMNS if f.name in family.members)
                head.append(f"{family.name} withheld ({named}: –): {verdict.reason}")
        if swept.trials:
            head.append(
                f"rows below: {GENERATION.brief} and ITL = observed x the twin's change; "
                "the rest the twin's"
            )
        if choose and swept.trials:
            head.append(swept.line())
    tail = [f"read: {r}" for r in whatif.read] + [f"assumed: {a}" for a in whatif.assumed]
    return "\n".join([*head, "", *lines, "", *tail]) + "\n"


def document(
    whatif: WhatIf,
    swept: sweep.Sweep,
    *,
    choose: bool = False,
    about: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON form: what it is of first (`about`: the vtop, the source and the window the
    twin was fitted over, as a report's JSON says them, `about_doc`), then observed, twin
    today, the check (each family's verdict), each configuration's figures, what is withheld
    and the goals it misses, the goals, and (with `choose`, a `--sweep`) the configuration they
    chose (null when none, `best_note` says why)."""
    check = whatif.check
    chosen = swept.chosen if choose else None
    goals = swept.goals
    return {
        **(about or {}),
        "observed": check.observed,
        "twin_today": check.twin,
        "prediction_check": {
            "errors": check.errors,
            "confidence": check.confidence,
            "reason": check.reason or None,
            "families": families_doc(check),
        },
        "workload": {"loop": whatif.workload.loop},
        "fit": {
            "grade": whatif.step.grade,
            "points": len(whatif.step.points),
            "prior": whatif.step.prior,
        },
        "read": whatif.read,
        "assumed": whatif.assumed,
        "predictions": [
            {
                "changes": t.changes,
                "confidence": t.prediction.confidence,
                "reason": t.prediction.reason or None,
                "predicted": {
                    name: {
                        "now": b.now,
                        "after": b.after,
                        "low": b.low,
                        "high": b.high,
                        "seen": b.seen,
                    }
                    for name in FIGURES
                    if (b := t.prediction.figures.get(name)) is not None
                },
                "withheld": t.prediction.withheld,
                "misses": list(t.misses),
            }
            for t in swept.trials
        ],
        "goals": {
            "max_itl_s": goals.max_itl_s,
            "max_ttft_s": goals.max_ttft_s,
            "allow_preemption": goals.allow_preemption,
            "itl_growth": goals.itl_growth,
            "line": goals.describe(),
        },
        "best": chosen.changes if chosen is not None else None,
        "best_note": (swept.note or None) if choose else None,
    }


def live_timing(args: argparse.Namespace) -> tuple[float, float]:
    """`--duration` and `--interval` in seconds (their defaults where not given); ValueError
    for a bad one, or for either with --replay, whose polls were made when it was recorded."""
    if args.replay is not None and (args.duration is not None or args.interval is not None):
        raise ValueError("--duration and --interval go with --url: a trace's polls were made")
    try:
        duration_s = durations.parse(args.duration or DEFAULT_DURATION)
    except ValueError as exc:
        raise ValueError(f"--duration: {exc}") from None
    interval_s = DEFAULT_INTERVAL_S if args.interval is None else args.interval
    if not duration_s > 0:
        raise ValueError("--duration must be positive")
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError("--interval must be positive")
    return duration_s, interval_s


def _reach_given(args: argparse.Namespace) -> bool:
    """Whether any `connection_args` flag was given."""
    return bool(
        args.header
        or args.trust_redirect
        or args.ca_cert
        or args.insecure
        or args.max_num_seqs is not None
        or args.max_num_batched_tokens is not None
    )


def _capacity(duration_s: float, interval_s: float) -> int:
    """Polls a watch makes: one an interval, four a second while warming up, and a few over.
    The store keeps all of them, so the window can be the whole watch."""
    return int(duration_s / interval_s) + int(WARM_UP_S / WARM_INTERVAL_S) + 16


async def _feed(
    source: FrameSource, monitor: Monitor, name: str, duration_s: float, interval_s: float
) -> str | None:
    """Poll into `monitor` until the duration is over or Ctrl-C; the first poll's error if the
    server did not answer it (the watch ends there: waiting on would only fit nothing). The
    `watching` line comes once the first poll was answered, so a server that is not there is
    the one line that says so."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    refused: list[str] = []

    def take(frame: Frame) -> None:
        monitor.feed(frame)
        if monitor.frames == 1:
            refused.extend(s.error for s in frame.scrapes if s.error is not None)
            if refused or not frame.scrapes:
                stop.set()
            else:
                say(f"watching {name} for {durations.span(duration_s)} to fit the twin…")

    try:
        await watch(source, interval_s, take, duration_s=duration_s, min_polls=2, stop=stop)
    finally:
        await source.aclose()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    return refused[0] if refused else None


def watch_live(spec: SourceSpec, duration_s: float) -> Watched:
    """Watch the server of `spec` (its URL, interval and connection flags) for `duration_s`
    (less on Ctrl-C) with the monitor's live source (knobs from the local process or the page,
    this host's GPUs). Raises `WatchError` when it did not answer the first poll or answered
    fewer than two, `UsageError` for a URL or flag that cannot be polled with at all."""
    source = make_source(spec)
    interval_s = spec.interval
    name = (watching(source) or list(spec.urls))[0]
    monitor = Monitor(capacity=_capacity(duration_s, interval_s))
    refused = asyncio.run(_feed(source, monitor, name, duration_s, interval_s))
    if refused is not None:
        raise WatchError(refused if name in refused else f"{name}: {refused}")
    watched = next((monitor.watched(endpoint) for endpoint in monitor.endpoints), None)
    if watched is None:
        raise WatchError(f"{name}: no poll was made")
    view = monitor.endpoints[watched.store.endpoint]
    answered = view.store.polls - view.store.failed_polls
    if answered < 2:
        last = view.last.error if view.last is not None and view.last.error else None
        why = f" (last: {last})" if last else ""
        raise WatchError(f"{name}: {answered} poll(s) answered, a twin needs two or more{why}")
    return watched


def about_doc(source: SourceDoc, store: Store, window_s: float) -> dict[str, Any]:
    """What a what-if is of, in the report's words and shapes (`vtop.report.build`): the vtop
    that made it, the source read, and the window of it the twin was fitted over (its polls;
    no rules run here, so no evaluations)."""
    fitted = store.times(window_s)
    window = window_doc(fitted[0] if fitted else None, fitted[-1] if fitted else None, len(fitted))
    return {"vtop": __version__, "source": source, "window": window}


def run(
    watched: Watched,
    window_s: float,
    configs: Sequence[dict[str, KnobValue]],
    goals: Goals,
    form: str,
    *,
    source: SourceDoc,
    choose: bool = False,
) -> int:
    """Fit the twin to what was watched over the window (at most what was read), predict each
    configuration (and with `choose`, a `--sweep`, choose the best under `goals`), and print
    the table or the document: one path for a trace and a watch."""
    times = watched.store.times()
    window_s = min(window_s, times[-1] - times[0])
    try:
        seen = observe(watched, window_s)
        whatif = prepare_from(seen)
    except Exception as exc:  # the server's own knobs the twin cannot start with, as a report
        return fail(f"no prediction: {twin_failed(exc)}", EXIT_UNKNOWN)  # says it
    try:
        swept = sweep.run(whatif, configs, goals)
    except ValueError as exc:  # knobs the twin cannot start with (a KV pool too small)
        return fail(str(exc), EXIT_USAGE)
    if form == "json":
        about = about_doc(source, watched.store, seen.window_s)
        doc = document(whatif, swept, choose=choose, about=about)
        write_stdout(json.dumps(doc, indent=2) + "\n")
    else:
        write_stdout(table(whatif, swept, choose=choose))
    return EXIT_OK


def _goals_given(args: argparse.Namespace) -> bool:
    """Whether any goal flag was given (they choose among a sweep's rows)."""
    return args.max_itl_ms is not None or args.max_ttft_s is not None or bool(args.allow_preemption)


def main(argv: Sequence[str]) -> int:
    """`vtop whatif …` (the words after `whatif`); returns the exit code."""
    args = build_parser().parse_args(list(argv))
    try:
        configs = sweep.configurations(args.set, args.sweep)
        window_s = durations.parse(args.window)
        if _goals_given(args) and args.sweep is None:
            raise ValueError(
                "--max-itl-ms, --max-ttft-s and --allow-preemption choose a row of a --sweep: "
                "give one"
            )
        duration_s, interval_s = live_timing(args)
        if args.replay is not None and _reach_given(args):
            raise ValueError(
                "--header, --trust-redirect, --ca-cert, --insecure, --max-num-seqs "
                "and --max-num-batched-tokens go with --url"
            )
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        if args.url is not None:
            spec = SourceSpec.from_args(args, urls=[args.url], interval=interval_s)
            watched = watch_live(spec, duration_s)
            source = source_doc("live", watched.store.endpoint)
        else:
            path = shipped_traces.resolve(args.replay)
            watched = read_trace(path, warn=warning)
            source = source_doc("replay", shown_name(path))
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except (TraceError, WatchError) as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    goals = goals_args.goals_from(args)
    try:
        return run(
            watched, window_s, configs, goals, args.format, source=source, choose=bool(args.sweep)
        )
    except KeyboardInterrupt:  # Ctrl-C while the twin runs: nothing to print, no traceback
        return EXIT_INTERRUPTED
