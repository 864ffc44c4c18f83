"""`vtop whatif (--url URL | --replay FILE) --set max_num_seqs=32 [--sweep max_num_seqs=8,16]`.

The command line around `vtop.whatif.predict`. The store it fits to comes from one of two
places, and everything after is one path (`run`):

- `--replay FILE` reads a recorded trace into a store (the same frames the monitor and the
  report read).
- `--url URL` watches the server for `--duration` (30 s) with the monitor's own live source
  (`vtop.cli.sources.make_source`) and poll loop (`vtop.report.run.watch`), feeding a
  `Monitor`: its store, the knobs it discovered and its GPUs are what a recording would have
  held. Ctrl-C ends the watch early and the twin is fitted to what was watched, if that is two
  polls or more. A server that does not answer the first poll is one line naming it at once,
  not a wait for the duration that ends in an empty fit.

It fits and self-checks the twin over the last `--window` (at most what was read), runs every
configuration asked for, and prints one row per configuration: what was observed, the twin at
today's knobs, and the twin after each change (`--set`s are one configuration together; each
`--sweep` value is one more, on top of the `--set`s). A twin the self-check rejects prints its
reason instead of predictions; a family of figures it finds off (occupancy, latency) prints
"–" in the after rows and a line saying why. `--format json` writes the same as one document
(each predicted figure as {now, after, low, high}, the issue's shape; each withheld one under
`withheld` with its reason), headed as a report's JSON is, by the same code
(`vtop.report.build`): the `vtop` that made it, its `source` and the `window` the twin was
fitted over, so a prediction kept beside a report says what it is of.

`--max-itl-ms` / `--max-ttft-s` with `--sweep` mark the best row: the highest predicted
generated tokens/s among the rows whose predicted ITL p50 / TTFT p90 stay within the bounds. A
row whose latency is withheld cannot show that it does, so it never qualifies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vtop import __version__, durations, fmt, knobs
from vtop.cli import connection_args, ranges, shipped_traces
from vtop.cli.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.output import fail, say, warning, write_stdout
from vtop.cli.sources import UsageError, make_source
from vtop.cli.usage import OneLineParser
from vtop.knobs import KnobValue
from vtop.model import Frame, Knob
from vtop.monitor import EndpointView, Monitor
from vtop.report.build import families_doc, source_doc, window_doc
from vtop.report.collect import twin_failed
from vtop.report.document import SourceDoc
from vtop.report.run import watch
from vtop.signals.store import Store
from vtop.sources.base import FrameSource, watching
from vtop.sources.pacing import WARM_INTERVAL_S, WARM_UP_S
from vtop.trace.reader import TraceError, TraceReader, shown_name
from vtop.whatif.predict import (
    FAMILIES,
    FIGURES,
    KNOB_FIELDS,
    LABELS,
    Prediction,
    WhatIf,
    observe,
    prepare_from,
)

COLUMNS = (
    ("generation_tokens_per_s", "gen tok/s"),
    ("running", "running"),
    ("waiting", "waiting"),
    ("kv_usage", "KV"),
    ("preemptions_per_s", "preempt/s"),
    ("queue_p50", "queue p50"),
    ("ttft_p50", "TTFT p50"),
    ("ttft_p90", "TTFT p90"),
    ("itl_p50", "ITL p50"),
)
"""The figures the table prints, and their headings."""
BEST_MARK = "◀ best"
DEFAULT_DURATION = "30s"
DEFAULT_INTERVAL_S = 1.0
"""How long `--url` watches, and how often it polls, when not told: the monitor's interval,
and half a minute, long enough for rates and a latency histogram to fill, short enough to
wait for at a prompt."""

Observed = tuple[Store, dict[str, Knob], str | None]
"""What the twin is fitted to: one endpoint's store, its latest knobs and its GPU's name."""


class WatchError(Exception):
    """The server could not be watched enough to fit a twin; the message names it and says why."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """The latency a sweep's best row must stay within; None where no bound was given."""

    max_itl_s: float | None = None
    max_ttft_s: float | None = None

    @property
    def given(self) -> bool:
        return self.max_itl_s is not None or self.max_ttft_s is not None

    def describe(self) -> str:
        parts = []
        if self.max_itl_s is not None:
            parts.append(f"ITL p50 <= {fmt.seconds(self.max_itl_s)}")
        if self.max_ttft_s is not None:
            parts.append(f"TTFT p90 <= {fmt.seconds(self.max_ttft_s)}")
        return ", ".join(parts)

    def admits(self, prediction: Prediction) -> bool:
        """Whether the prediction's ITL p50 and TTFT p90 are predicted and within the bounds."""
        for name, bound in (("itl_p50", self.max_itl_s), ("ttft_p90", self.max_ttft_s)):
            band = prediction.figures.get(name)
            if bound is not None and (band is None or band.after > bound):
                return False
        return True


def parse_bound(flag: str, text: str | float | None, unit_s: float) -> float | None:
    """A latency bound in seconds from the flag's text in its unit; ValueError names the flag."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{flag} {text}: expected a positive number")
    return value * unit_s


def best(predictions: Sequence[Prediction], bounds: Bounds) -> Prediction | None:
    """The row with the highest predicted generated tokens/s within the bounds; None if none."""
    admitted = [
        (band.after, i)
        for i, p in enumerate(predictions)
        if bounds.admits(p) and (band := p.figures.get("generation_tokens_per_s")) is not None
    ]
    return predictions[max(admitted)[1]] if admitted else None


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
    parser.add_argument(
        "--max-itl-ms",
        metavar="MS",
        type=ranges.MAX_ITL_MS,
        help=ranges.ranged("with --sweep: mark the best row with ITL p50 <= MS", ranges.MAX_ITL_MS),
    )
    parser.add_argument(
        "--max-ttft-s",
        metavar="S",
        type=ranges.MAX_TTFT_S,
        help=ranges.ranged("with --sweep: mark the best row with TTFT p90 <= S", ranges.MAX_TTFT_S),
    )
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


def parse_value(name: str, text: str) -> KnobValue:
    """A knob's value as its type, within its range (`vtop.knobs`); ValueError, one line,
    names the knob and what it may be."""
    if name not in KNOB_FIELDS:
        raise ValueError(f"unknown knob {name!r}; a what-if can set {', '.join(KNOB_FIELDS)}")
    return knobs.parse(name, text)


def configurations(sets: Sequence[str], sweep: str | None) -> list[dict[str, KnobValue]]:
    """The configurations asked for: the `--set`s, once per `--sweep` value if there is one."""
    base: dict[str, KnobValue] = {}
    for item in sets:
        name, eq, text = item.partition("=")
        if not eq:
            raise ValueError(f"--set {item}: expected KNOB=VALUE")
        base[name.strip()] = parse_value(name.strip(), text.strip())
    if sweep is None:
        return [base] if base else []
    name, eq, texts = sweep.partition("=")
    if not eq or not texts:
        raise ValueError(f"--sweep {sweep}: expected KNOB=V1,V2,...")
    return [base | {name.strip(): parse_value(name.strip(), t.strip())} for t in texts.split(",")]


def read_trace(path: str) -> Observed:
    """The trace's first endpoint as a store, its latest knobs and its GPU's name."""
    store: Store | None = None
    knobs: dict[str, Knob] = {}
    gpu: str | None = None
    with TraceReader(path, warn=warning) as reader:
        for frame in reader.frames():
            if not frame.scrapes:
                continue
            scrape = frame.scrapes[0]
            if store is None:
                store = Store(scrape.endpoint, capacity=1_000_000)
            if scrape.endpoint != store.endpoint:
                continue
            if scrape.knobs is not None:
                knobs = dict(scrape.knobs)
            store.ingest(scrape, frame.gpu)
            if frame.gpu is not None and frame.gpu.gpus:
                gpu = frame.gpu.gpus[0].name
    if store is None or len(store) < 2:
        raise TraceError(f"{path}: fewer than two polls to fit a twin to")
    return store, knobs, gpu


def _label(changes: dict[str, KnobValue]) -> str:
    return ", ".join(f"{k}={fmt.knob(v)}" for k, v in changes.items())


def _cell(name: str, value: float | None) -> str:
    if value is None:
        return fmt.DASH
    if name == "kv_usage":
        return fmt.pct(value)
    if name in ("queue_p50", "ttft_p50", "ttft_p90", "itl_p50"):
        return fmt.seconds(value)
    return fmt.num(value)


def _family_error(whatif: WhatIf) -> str:
    """`; occupancy off by 84% (waiting); latency off 84.9x (queue p50)` for the families
    beyond throughput that the self-check could judge."""
    parts = []
    for name, verdict in whatif.check.families.items():
        if name == "throughput" or verdict.worst is None or verdict.error is None:
            continue
        by = f"{verdict.error:.3g}x" if name == "latency" else fmt.pct(verdict.error)
        parts.append(f"; {name} off by {by} ({LABELS[verdict.worst]})")
    return "".join(parts)


def table(whatif: WhatIf, predictions: list[Prediction], bounds: Bounds | None = None) -> str:
    """Observed, twin today, twin after each configuration: one row each; "–" where a figure
    is withheld, and the best row marked when bounds are given."""
    rows: list[list[str]] = [["", *(head for _, head in COLUMNS), ""]]
    rows.append(["observed", *(_cell(n, whatif.check.observed.get(n)) for n, _ in COLUMNS), ""])
    rows.append(["twin today", *(_cell(n, whatif.check.twin.get(n)) for n, _ in COLUMNS), ""])
    chosen = best(predictions, bounds) if bounds is not None and bounds.given else None
    for p in predictions:
        cells = [fmt.DASH if n in p.withheld else _cell(n, p.twin_after.get(n)) for n, _ in COLUMNS]
        rows.append([_label(p.changes), *cells, BEST_MARK if p is chosen else ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i in (0, len(r) - 1) else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    check = whatif.check
    token_error = check.errors.get("generation_tokens_per_s")
    head = [
        f"workload: {whatif.workload.loop} loop; {whatif.step.describe()}",
        f"self-check: gen tok/s off by {fmt.pct(token_error)}{_family_error(whatif)}; "
        f"confidence {check.confidence}",
    ]
    if check.withheld:
        head.append(f"predictions withheld: {check.reason}")
    else:
        for family in FAMILIES:
            verdict = check.families.get(family.name)
            if verdict is not None and verdict.withheld:
                shown = ", ".join(LABELS[n] for n, _ in COLUMNS if n in family.members)
                head.append(f"{family.name} withheld ({shown}: –): {verdict.reason}")
    if bounds is not None and bounds.given and predictions:
        if chosen is None:
            head.append(
                f"best under {bounds.describe()}: none, no row is predicted within the bounds"
            )
        else:
            head.append(f"best under {bounds.describe()}: {_label(chosen.changes)}")
    tail = [f"read: {r}" for r in whatif.read] + [f"assumed: {a}" for a in whatif.assumed]
    return "\n".join([*head, "", *lines, "", *tail]) + "\n"


def document(
    whatif: WhatIf,
    predictions: list[Prediction],
    bounds: Bounds | None = None,
    *,
    about: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON form: what it is of first (`about`: the vtop, the source and the window the
    twin was fitted over, as a report's JSON says them, `about_doc`), then observed, twin
    today, the check (each family's verdict), each configuration's figures and what is
    withheld, and the best configuration under the bounds (null when none qualifies or none
    were given)."""
    check = whatif.check
    chosen = best(predictions, bounds) if bounds is not None and bounds.given else None
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
                "changes": p.changes,
                "confidence": p.confidence,
                "reason": p.reason or None,
                "predicted": {
                    name: {"now": b.now, "after": b.after, "low": b.low, "high": b.high}
                    for name in FIGURES
                    if (b := p.figures.get(name)) is not None
                },
                "withheld": p.withheld,
            }
            for p in predictions
        ],
        "bounds": {
            "max_itl_s": bounds.max_itl_s if bounds is not None else None,
            "max_ttft_s": bounds.max_ttft_s if bounds is not None else None,
        },
        "best": chosen.changes if chosen is not None else None,
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


def live_source(
    url: str, interval_s: float, reach: argparse.Namespace | None = None
) -> FrameSource:
    """The monitor's live source for `url`, as `vtop --url URL` makes it (knobs from the local
    process or the page, this host's GPUs), with `reach`'s `connection_args` flags (none:
    their defaults); the URL and the flags are checked there, a bad one raises `UsageError`."""
    given = vars(reach) if reach is not None else {}
    flags = argparse.Namespace(
        url=[url],
        interval=interval_s,
        prometheus=None,
        demo=None,
        targets=[],
        discover=False,
        header=given.get("header") or [],
        insecure=given.get("insecure", False),
        trust_redirect=given.get("trust_redirect") or [],
        ca_cert=given.get("ca_cert"),
        max_num_seqs=given.get("max_num_seqs"),
        max_num_batched_tokens=given.get("max_num_batched_tokens"),
    )
    return make_source(flags)


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


def _gpu_name(monitor: Monitor, view: EndpointView) -> str | None:
    """The watched server's GPU: this host's (NVML) only when the server runs here, else one
    its own page names; None when neither says (the fit then says what it assumed)."""
    for reading in monitor.gpus.gpus:
        if view.local or reading.source == "page":
            return reading.name
    return None


def watch_live(
    url: str, duration_s: float, interval_s: float, reach: argparse.Namespace | None = None
) -> Observed:
    """Watch `url` for `duration_s` (less on Ctrl-C) as the monitor does. Raises `WatchError`
    when it did not answer the first poll or answered fewer than two, `UsageError` for a URL
    that cannot be polled at all (`reach`: the connection flags, `live_source`)."""
    source = live_source(url, interval_s, reach)
    name = (watching(source) or [url])[0]
    monitor = Monitor(capacity=_capacity(duration_s, interval_s))
    refused = asyncio.run(_feed(source, monitor, name, duration_s, interval_s))
    if refused is not None:
        raise WatchError(refused if name in refused else f"{name}: {refused}")
    view = next(iter(monitor.endpoints.values()), None)
    if view is None:
        raise WatchError(f"{name}: no poll was made")
    answered = view.store.polls - view.store.failed_polls
    if answered < 2:
        last = view.last.error if view.last is not None and view.last.error else None
        why = f" (last: {last})" if last else ""
        raise WatchError(f"{name}: {answered} poll(s) answered, a twin needs two or more{why}")
    return view.store, dict(view.knobs), _gpu_name(monitor, view)


def about_doc(source: SourceDoc, store: Store, window_s: float) -> dict[str, Any]:
    """What a what-if is of, in the report's words and shapes (`vtop.report.build`): the vtop
    that made it, the source read, and the window of it the twin was fitted over (its polls;
    no rules run here, so no evaluations)."""
    fitted = store.times(window_s)
    window = window_doc(fitted[0] if fitted else None, fitted[-1] if fitted else None, len(fitted))
    return {"vtop": __version__, "source": source, "window": window}


def run(
    observed: Observed,
    window_s: float,
    configs: Sequence[dict[str, KnobValue]],
    bounds: Bounds,
    form: str,
    *,
    source: SourceDoc,
) -> int:
    """Fit the twin to what was observed over the window (at most what was read), predict each
    configuration, and print the table or the document: one path for a trace and a watch."""
    store, knobs, gpu = observed
    times = store.times()
    window_s = min(window_s, times[-1] - times[0])
    try:
        seen = observe(store, window_s, knobs, gpu_name=gpu)
        whatif = prepare_from(seen)
    except Exception as exc:  # the server's own knobs the twin cannot start with, as a report
        return fail(f"no prediction: {twin_failed(exc)}", EXIT_UNKNOWN)  # says it
    try:
        predictions = [whatif.predict(c) for c in configs]
    except ValueError as exc:  # knobs the twin cannot start with (a KV pool too small)
        return fail(str(exc), EXIT_USAGE)
    if form == "json":
        doc = document(whatif, predictions, bounds, about=about_doc(source, store, seen.window_s))
        write_stdout(json.dumps(doc, indent=2) + "\n")
    else:
        write_stdout(table(whatif, predictions, bounds))
    return EXIT_OK


def main(argv: Sequence[str]) -> int:
    """`vtop whatif …` (the words after `whatif`); returns the exit code."""
    args = build_parser().parse_args(list(argv))
    try:
        configs = configurations(args.set, args.sweep)
        window_s = durations.parse(args.window)
        bounds = Bounds(
            parse_bound("--max-itl-ms", args.max_itl_ms, 0.001),
            parse_bound("--max-ttft-s", args.max_ttft_s, 1.0),
        )
        if bounds.given and args.sweep is None:
            raise ValueError("--max-itl-ms and --max-ttft-s pick a row of a --sweep: give one")
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
            observed = watch_live(args.url, duration_s, interval_s, args)
            source = source_doc("live", observed[0].endpoint)
        else:
            path = shipped_traces.resolve(args.replay)
            observed = read_trace(path)
            source = source_doc("replay", shown_name(path))
    except UsageError as exc:
        return fail(str(exc), EXIT_USAGE)
    except (TraceError, WatchError) as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    try:
        return run(observed, window_s, configs, bounds, args.format, source=source)
    except KeyboardInterrupt:  # Ctrl-C while the twin runs: nothing to print, no traceback
        return EXIT_INTERRUPTED
