"""A finding's detail as text: the diagnosis, the change (each flag and the formula that gave
its value), the evidence, and each recommendation's arithmetic in words and numbers with
where every input came from (no Textual here).

Provenance is the point: a recommendation computed from `max_num_seqs 256 (default, assumed)`
deserves less trust than one computed from the server's command line, and the screen says
which it is.

A finding whose evidence is still accruing says what it waits for (seconds more, or requests
to finish) and that its advice comes with the verdict: "no flag change" there would read as
"nothing to change".

The order is what a user reads first at 80×24, where the screen holds some twenty rows: what
is wrong, what to change (and the formula behind each number), what that will buy, then the
evidence and the arithmetic below. The predicted effect (`vtop.whatif.advice`) is rows of its
own (`prediction_rows`, `predicting_rows`, `unavailable_rows`), put after the change
(`with_prediction`): the twin takes about a second, so the screen shows the rest at once and
these rows when the twin is done; which thread runs it is the screen's business, not this
module's.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vtop import durations, fmt
from vtop.knobs import format_value
from vtop.model import ACCRUING, Finding, Knob, Recommendation
from vtop.triage.explain import is_literal
from vtop.ui.views.verdict import LABELS, held_of
from vtop.whatif.advice import Advice

PROVENANCE = {
    "metrics": "read from the server",
    "process": "read from the server's command line",
    "flag": "given to vtop",
    "inferred": "inferred from behaviour",
    "default": "version default, assumed",
}
PREDICTED = "Predicted effect"
CHANGE = "Change"
EVIDENCE_NAME_W = 32
"""Evidence names wider than this push their value right instead of widening the column."""
MIN_TEXT_W = 24
"""A hanging indent never leaves less than this for the text beside it."""


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the detail and the column its wrapped continuation starts at."""

    text: str
    hang: int = 0


def knob_text(k: Knob) -> str:
    """`256 (version default, assumed: vLLM 0.32 default, GPUs under 70 GiB)`."""
    where = PROVENANCE.get(k.provenance, k.provenance)
    detail = f": {k.detail}" if k.detail else ""
    return f"{format_value(k.value)} ({where}{detail})"


def _input(v: Knob | float | None) -> str:
    if v is None:
        return fmt.DASH + " (unknown)"
    if isinstance(v, Knob):
        return knob_text(v)
    return fmt.num(v, digits=4)


def flag_row(r: Recommendation) -> Row:
    """The `vllm serve` flag, whether it takes the knob down or up and from what."""
    moved = r.change or f"{r.direction} {r.knob}"  # `down from 256`, else `set kv_cache_dtype`
    return Row(f"  {r.flag}    ({moved}; confidence {r.confidence})", 4)


def change_rows(f: Finding) -> list[Row]:
    """The change, first after the diagnosis: each flag and the formula that gave its value
    (none for a literal one, `fp8`; the formula's value where the twin chose another), so
    that a screen of 80×24 shows what to change and why that number with the predicted
    effect, the arithmetic below."""
    if not f.recommendations:
        return []
    out = [Row(""), Row(CHANGE)]
    for r in f.recommendations:
        out.append(flag_row(r))
        if r.formula_value is not None:
            gave = format_value(r.formula_value)
            out.append(Row(f"    chosen    by the twin over the formula's {gave}", 14))
        elif r.formula and not is_literal(r.formula):
            out.append(Row(f"    formula   {r.formula}", 14))
    return out


def recommendation_rows(r: Recommendation) -> list[Row]:
    """The `vllm serve` flag and the engine argument (`LLM(...)`, `AsyncEngineArgs`) it
    sets, then the current value, the arithmetic in words and numbers (`why`), every input
    with where it came from and the trade-off (the raw formula is in the change above)."""
    current = knob_text(r.current) if r.current else fmt.DASH + " (unknown)"
    out = [
        flag_row(r),
        Row(f"    engine    {r.engine_arg}", 14),
        Row(f"    current   {current}", 14),
    ]
    if r.explanation:
        out.append(Row(f"    why       {r.explanation}", 14))
    for name, value in _sorted(r.inputs):
        out.append(Row(f"      {name} = {_input(value)}", 9 + len(name)))
    if r.tradeoff:
        out.append(Row(f"    tradeoff  {r.tradeoff}", 14))
    return out


def _sorted(inputs: Mapping[str, Knob | float | None]) -> list[tuple[str, Knob | float | None]]:
    return sorted(inputs.items())


def rows(f: Finding, now: float | None = None) -> list[Row]:
    """The detail screen's text, one row per line, each with its hanging indent."""
    out = [
        Row(f"{LABELS[f.severity]}  {f.state}  {f.title}"),
        Row(f"rule {f.rule}  ·  {f.endpoint}"),
        Row(""),
        Row(f.summary),
    ]
    # One line for how long: the rule's own count when it has a duration (with how long it
    # took to fire, or still needs), the wall-clock age otherwise; both would say one fact twice.
    if f.state == "pending":
        more = "before it fires"
        if f.needs_s is not None:
            more = f"so far: it fires in {f.needs_s:.0f} s more if it goes on holding"
        out.append(Row(f"holding for {held_of(f)} {more}"))
    elif f.state in ACCRUING:
        have = f" ({', '.join(f.missing)})" if f.missing else ""
        out.append(
            Row(
                f"holding for {f.held_s:.0f} s; it can fire once it has more data{have}, "
                "not after a set time"
            )
        )
    elif f.for_s:
        # A firing finding's `for_s` is what it took, on the quicker of the rule's two paths.
        took = f" (it fired after {f.for_s:.0f} s)" if f.state == "firing" else ""
        out.append(Row(f"held {f.held_s:.0f} s{took}"))
    elif f.since is not None and now is not None:
        out.append(Row(f"since {durations.compact(now - f.since)} ago"))
    if f.suppressed_by:
        out.append(Row(f"suppressed: explained by {f.suppressed_by}, so it gives no advice"))
    out += change_rows(f)
    out += [Row(""), Row("Evidence")]
    if f.evidence:
        w = min(max(len(name) for name, _ in f.evidence), EVIDENCE_NAME_W)
        out += [Row(f"  {name:<{w}}  {value}", w + 4) for name, value in f.evidence]
    else:
        out.append(Row("  (none recorded)"))
    out += [Row(""), Row("Recommendations")]
    if f.recommendations:
        for r in f.recommendations:
            out += recommendation_rows(r)
    elif f.state in ACCRUING:
        out.append(Row("  none yet: advice comes with the verdict, once the rule fires", 2))
    else:
        out.append(Row("  no flag change"))
    return out


def with_prediction(rows: list[Row], predicted: list[Row]) -> list[Row]:
    """`rows` (a finding's detail) with the `predicted` block (blank line first) just before
    its evidence, after the change, or at the end of a detail without any."""
    at = next((i for i, r in enumerate(rows) if r.text == "Evidence"), len(rows) + 1) - 1
    return [*rows[:at], *predicted, *rows[at:]]


def predicting_rows() -> list[Row]:
    """What the block says while the twin runs."""
    return [Row(""), Row(f"{PREDICTED}: running the twin…")]


def unavailable_rows(why: str) -> list[Row]:
    """One line where no prediction can be made, and why (no store, the twin failed)."""
    return [Row(""), Row(f"{PREDICTED}: prediction unavailable: {why}", 2)]


def prediction_rows(advice: Advice | None) -> list[Row]:
    """The twin's answer: the figures the recommendations move, together, and when the twin
    does not back the promise, the sentence that demotes it ("but …"); how the configuration
    was chosen and under which goals, and the trade-offs beside it ("instead: …"), as the
    reports say them; nothing when the twin can set none of the finding's knobs."""
    if advice is None:
        return []
    out = [Row(""), Row(PREDICTED), Row(f"  {advice.line()}", 2)]
    verdict = advice.verdict()
    if verdict:
        out.append(Row(f"  but {verdict}", 6))
    return out + [Row(f"  {label}: {text}", 4) for label, text in advice.choice_lines()]


def lines(f: Finding, now: float | None = None) -> list[str]:
    """The detail screen's text, one string per line (unwrapped)."""
    return [row.text for row in rows(f, now)]


def wrap(rows: Sequence[Row], width: int) -> list[str]:
    """`rows` wrapped at `width`, a row's continuation lines indented by its hang (under the
    value, not at column 0), so an evidence value or a provenance reads as one block."""
    out: list[str] = []
    for row in rows:
        if width <= 0 or len(row.text) <= width:
            out.append(row.text)
            continue
        hang = " " * min(row.hang, max(0, width - MIN_TEXT_W))
        out += textwrap.wrap(row.text, width, subsequent_indent=hang, break_on_hyphens=False) or [
            ""
        ]
    return out
