"""`vtop --replay FILE --train` without a screen: the training loop on stdin and stdout.

The replay screen is where training belongs; this runner is the same quiz for a plain terminal
(or a script, or a test) and the reference the screen is held to. For each question it shows
what the learner would have seen on the dashboard in the five minutes before the pause (the
key signals, with their trend, and the configuration), never the findings; asks for the
diagnosis by number from the whole catalog, then the knob (or none) and which way to move it
(or its new value); reveals the finding with its evidence; and prints the score at the end.
End of input ends the session early, with the score so far.

The quiz itself (the questions, the grading, the score) is `vtop.training`, which the
screen shares; this module is only its conversation on a plain terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from vtop import fmt, knobs
from vtop.cli.exits import EXIT_OK, EXIT_UNKNOWN
from vtop.cli.output import say, warning
from vtop.figures import FIGURE, TTFT
from vtop.knobs import KnobValue
from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.report.collect import FindingsFn, monitor_findings
from vtop.report.document import KnobDoc, LatencyDoc
from vtop.report.text import SIGNAL_ORDER, series
from vtop.trace.reader import TraceError
from vtop.training.grading import Answer, Score, grade
from vtop.training.questions import (
    CONFIG_KNOBS,
    DIRECTIONS,
    Choice,
    Direction,
    Question,
    moves,
    questions,
)
from vtop.whatif.advice import Advisor
from vtop.whatif.goals import Goals

CONTEXT_S = 300.0


def catalog_of(monitor: Monitor) -> list[Choice]:
    """Every rule the monitor's engine knows, as diagnoses to choose from."""
    engine = getattr(monitor, "engine", None)
    rules = getattr(engine, "rules", ())
    return [Choice(str(r.id), str(r.title)) for r in rules]


def _no_findings(monitor: Monitor) -> list[Finding]:
    return []


def context(path: str, q: Question) -> list[str]:
    """The dashboard's numbers over the minutes before the pause, findings hidden."""
    from vtop.report.run import replay_document

    doc = replay_document(path, start=q.t - CONTEXT_S, end=q.t, findings=_no_findings, warn=warning)
    ep = next((e for e in doc["endpoints"] if e["url"] == q.endpoint), None)
    if ep is None:
        return []
    out = [
        f"  the {fmt.clock(doc['window']['from'])} → {fmt.clock(doc['window']['to'])} "
        f"before the pause on {q.endpoint}:"
    ]
    for name in SIGNAL_ORDER:
        s = ep["signals"].get(name)
        if s is None or s["avg"] is None:
            continue
        fig = FIGURE[name]
        trend = series(doc, name)
        share = fig.unit == "ratio"  # a share's trend spans 0 to 100 %, as in the report
        spark = fmt.spark(trend, 20, lo=0.0, hi=1.0) if share else fmt.spark(trend, 20)
        out.append(
            f"    {fig.label:<22}avg {fig.report(s['avg']):>8}  max {fig.report(s['max']):>8}  "
            f"{spark}"
        )
    ttft: LatencyDoc | dict[str, float | None] = ep["latency"].get("ttft", {})
    if ttft.get("p90") is not None:
        out.append(
            f"    {TTFT.brief + ' p50 / p90':<22}{TTFT.report(ttft['p50']):>12}  "
            f"{TTFT.report(ttft['p90']):>12}"
        )
    knobs: dict[str, KnobDoc] = ep["knobs"]
    shown = [f"{n} {fmt.knob(k['value'])}" for n, k in knobs.items() if n in CONFIG_KNOBS]
    if shown:
        out.append("    config: " + ", ".join(shown))
    return out


def _ask(prompt: str, read: Callable[[], str], out: TextIO, echo: bool = False) -> str:
    """One answer; `echo`: write it after the prompt, as a terminal would have (answers
    piped in would otherwise run into the next line)."""
    out.write(prompt)
    out.flush()
    line = read()
    if not line:
        raise EOFError
    if echo:
        out.write(line.strip() + "\n")
    return line.strip()


def knob_name(text: str) -> str:
    """A knob as a learner may type it: `max_num_seqs`, `--max-num-seqs` or `max-num-seqs`."""
    return text.strip().removeprefix("--").replace("-", "_")


def run(
    path: str,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    findings: FindingsFn = monitor_findings,
    catalog: list[Choice] | None = None,
    goals: Goals | None = None,
) -> int:
    """The whole session; returns an exit code (0, or 3 for an unreadable trace). `goals`:
    what the twin's choice in each reveal's prediction optimises."""
    inp = stdin or sys.stdin
    out = stdout or sys.stdout
    try:
        qs = questions(
            path,
            catalog if catalog is not None else catalog_of(Monitor()),
            findings=findings,
            warn=warning,
        )
    except TraceError as exc:
        say(str(exc))
        return EXIT_UNKNOWN
    verdicts = []
    advisor = Advisor(goals)  # one for the session: a second look at the same load is instant
    echo = not _is_tty(inp)
    out.write(f"training on {path}: {len(qs)} incident(s); findings are hidden until you answer\n")
    try:
        for q in qs:
            out.write(
                f"\n[{q.number}/{len(qs)}] paused at {fmt.when(_iso(q.t))}: something "
                "started to go wrong.\n"
            )
            out.write("\n".join(context(path, q)) + "\n")
            for i, c in enumerate(q.choices, 1):
                out.write(f"  {i:>2}. {c.rule}: {c.title}\n")
            pick = _ask("diagnosis (number or rule id): ", inp.readline, out, echo)
            rule = _choice(pick, q.choices)
            knob = value = direction = None
            out.write("  knobs: " + ", ".join(f"{i}. {k}" for i, k in enumerate(q.knobs, 1)) + "\n")
            knob = _knob(q.knobs, inp.readline, out, echo)
            if knob:
                direction, value = _change(knob, inp.readline, out, echo)
            verdict = grade(q, Answer(rule, knob, value, direction), advisor)
            verdicts.append(verdict)
            out.write("\n".join("  " + line for line in verdict.lines()) + "\n")
    except EOFError:
        out.write("\n(end of input)\n")
    out.write(Score(verdicts).summary(len(qs)) + "\n")
    return EXIT_OK


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _change(
    knob: str, read: Callable[[], str], out: TextIO, echo: bool = False
) -> tuple[Direction | None, KnobValue]:
    """Which way to move `knob`, or its new value: a value outside the knob's range
    (`vtop.knobs`: 0, -5, nan, 1e23, `kv_cache_dtype=evil`) is one line, and asked again."""
    ways = " or ".join(moves(knob))
    while True:
        said = _ask(f"{knob}: {ways}, or its new value: ", read, out, echo)
        direction = _direction(said)
        if direction is not None or not said:
            return direction, None
        try:
            return None, knobs.parse(knob, said)
        except ValueError as exc:
            out.write(f"  {exc}\n")


def _knob(
    listed: tuple[str, ...], read: Callable[[], str], out: TextIO, echo: bool = False
) -> str | None:
    """The knob to change, by number or by name as `knob_name` reads it; None for no server
    knob. A number or a name not listed is one line, and asked again."""
    while True:
        typed = _ask("knob to change (empty: no server knob): ", read, out, echo)
        if not typed:
            return None
        if typed.isdigit():
            if 1 <= int(typed) <= len(listed):
                return listed[int(typed) - 1]
            out.write(f"  no knob {typed}: pick 1 to {len(listed)}, or type its name\n")
            continue
        name = knob_name(typed)
        if name in listed or name in knobs.KNOBS:
            return name
        out.write(f"  {typed!r} is not a knob here: pick a number or one of the names listed\n")


def _direction(text: str) -> Direction | None:
    low = text.strip().lower()
    return next((d for d in DIRECTIONS if d == low), None)


def _choice(text: str, choices: tuple[Choice, ...]) -> str:
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1].rule
    return text


def _iso(t: float) -> str | None:
    from vtop.report.build import iso

    return iso(t)
