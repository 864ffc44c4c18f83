"""`vtop whatif --replay FILE --set max_num_seqs=32 [--sweep max_num_seqs=8,16,32]`.

The command line around `vtop.whatif.predict`: it reads a recorded trace into a store (the
same frames the monitor and the report read), fits and self-checks the twin over the last
`--window` of it, runs every configuration asked for, and prints one row per configuration:
what was observed, the twin at today's knobs, and the twin after each change (`--set`s are one
configuration together; each `--sweep` value is one more, on top of the `--set`s). A twin the
self-check rejects prints its reason instead of predictions. `--format json` writes the same
as one document (each predicted figure as {now, after, low, high}, the issue's shape).

Only replays for now: a live `--url` needs the poller to run for the window first, which is
the monitor's job (a later piece of issue 20).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from vtop import durations, fmt
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from vtop.cli.output import fail, warning, write_stdout
from vtop.cli.usage import OneLineParser
from vtop.model import Knob, KnobValue
from vtop.signals.store import Store
from vtop.trace.reader import TraceError, TraceReader
from vtop.whatif.predict import FIGURES, KNOB_FIELDS, Prediction, WhatIf, prepare

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


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="vtop whatif",
        description="Predict a server's figures after a knob change, from a twin fitted to it.",
    )
    parser.add_argument("--replay", metavar="FILE", required=True, help="a trace of the server")
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
        "--window", metavar="DURATION", default="5m", help="the trace's last DURATION (5m)"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="a table (text) or JSON"
    )
    return parser


def parse_value(name: str, text: str) -> KnobValue:
    """A knob's value as its type; ValueError names the knob."""
    kind = KNOB_FIELDS.get(name)
    if kind is None:
        raise ValueError(f"unknown knob {name!r}; a what-if can set {', '.join(KNOB_FIELDS)}")
    if kind is bool:
        if text.lower() in ("true", "on", "1", "yes"):
            return True
        if text.lower() in ("false", "off", "0", "no"):
            return False
        raise ValueError(f"{name}={text}: expected true or false")
    try:
        value: KnobValue = kind(text)
    except ValueError:
        raise ValueError(f"{name}={text}: expected {kind.__name__}") from None
    return value


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


def read_trace(path: str) -> tuple[Store, dict[str, Knob], str | None]:
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
    if name == "kv_usage":
        return fmt.pct(value)
    if name in ("queue_p50", "ttft_p50", "ttft_p90", "itl_p50"):
        return fmt.seconds(value)
    return fmt.num(value)


def table(whatif: WhatIf, predictions: list[Prediction]) -> str:
    """Observed, twin today, twin after each configuration: one row each."""
    rows: list[list[str]] = [["", *(head for _, head in COLUMNS)]]
    rows.append(["observed", *(_cell(n, whatif.check.observed.get(n)) for n, _ in COLUMNS)])
    rows.append(["twin today", *(_cell(n, whatif.check.twin.get(n)) for n, _ in COLUMNS)])
    for p in predictions:
        rows.append([_label(p.changes), *(_cell(n, p.twin_after.get(n)) for n, _ in COLUMNS)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    check = whatif.check
    token_error = check.errors.get("generation_tokens_per_s")
    head = [
        f"workload: {whatif.workload.loop} loop; {whatif.step.describe()}",
        f"self-check: gen tok/s off by {fmt.pct(token_error)}; confidence {check.confidence}",
    ]
    if check.withheld:
        head.append(f"predictions withheld: {check.reason}")
    tail = [f"read: {r}" for r in whatif.read] + [f"assumed: {a}" for a in whatif.assumed]
    return "\n".join([*head, "", *lines, "", *tail]) + "\n"


def document(whatif: WhatIf, predictions: list[Prediction]) -> dict[str, Any]:
    """The JSON form: observed, twin today, the check, and each configuration's figures."""
    check = whatif.check
    return {
        "observed": check.observed,
        "twin_today": check.twin,
        "prediction_check": {
            "errors": check.errors,
            "confidence": check.confidence,
            "reason": check.reason or None,
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
            }
            for p in predictions
        ],
    }


def main(argv: Sequence[str]) -> int:
    """`vtop whatif …` (the words after `whatif`); returns the exit code."""
    args = build_parser().parse_args(list(argv))
    try:
        configs = configurations(args.set, args.sweep)
        window_s = durations.parse(args.window)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        store, knobs, gpu = read_trace(args.replay)
    except TraceError as exc:
        return fail(str(exc), EXIT_UNKNOWN)
    times = store.times()
    window_s = min(window_s, times[-1] - times[0])
    whatif = prepare(store, window_s, knobs, gpu_name=gpu)
    try:
        predictions = [whatif.predict(c) for c in configs]
    except ValueError as exc:  # knobs the twin cannot start with (a KV pool too small)
        return fail(str(exc), EXIT_USAGE)
    if args.format == "json":
        write_stdout(json.dumps(document(whatif, predictions), indent=2) + "\n")
    else:
        write_stdout(table(whatif, predictions))
    return EXIT_OK
