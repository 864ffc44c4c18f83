"""The triage panel's lines, from findings (no Textual here).

Order is what a user should read first: firing findings by severity (critical first), then
pending ones (dimmed, with how long their condition has held of how long the rule waits),
then suppressed ones (explained by a root cause, so they give no advice), then the rules
whose condition holds but which wait for more evidence (requests to finish). A firing
finding takes two lines: what is wrong, then the flags that fix it (with the engine
arguments they set where the width allows). With nothing firing the panel still says
something useful: that the server cannot be reached, the likely cause while a rule's
evidence accrues, or that nothing holds.

A verdict takes seconds to come (a rule waits for its evidence), and a screen that reads "no
bottleneck found" in those seconds tells a user whose server is in trouble the opposite of
what vtop is about to say. So while nothing fires and a warning-level rule's condition holds,
the first line names it, `likely budget-too-small · 8 of 15 s`, drawn apart from a verdict
(kind "likely") and without advice: flags come with the verdict only. Which rule is likely is
the first accruing warning-level finding due within 30 s (about to be the verdict), else the
first in the engine's own order (pending before insufficient, then by severity and the rules'
root-cause `order`); the panel keeps that order rather than its own by-progress one, because a
symptom held back for its root cause has held longer than the cause that will explain it.
Info-level rules (too little load, prefix caching off) are not a bottleneck: they neither make
a likely line nor stop the all-clear.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vtop.model import ACCRUING, Finding, Severity
from vtop.triage.engine import HOLD_BACK_S

LineKind = Literal[
    "firing", "action", "likely", "pending", "suppressed", "insufficient", "ok", "error", "info"
]

LABELS = {
    Severity.CRITICAL: "CRIT",
    Severity.WARNING: "WARN",
    Severity.INFO: "INFO",
    Severity.OK: "OK",
}


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the triage panel; `finding` is what Enter on it opens."""

    kind: LineKind
    text: str
    severity: Severity = Severity.OK
    finding: Finding | None = None
    label: str = ""
    wide: str = ""
    """The same line with more in it, shown instead where it fits on one row (a finding's
    title beside its pending progress, on wide terminals)."""


def order(findings: Sequence[Finding]) -> list[Finding]:
    """Firing by severity, then pending by progress, then suppressed."""
    rank = {"firing": 0, "pending": 1, "suppressed": 2, "insufficient": 3}

    def key(f: Finding) -> tuple[int, int, float, str]:
        progress = f.held_s / f.for_s if f.for_s else 0.0
        return (rank.get(f.state, 3), -int(f.severity), -progress, f.rule)

    return sorted(findings, key=key)


def flags(finding: Finding) -> str:
    """The recommended flags of a finding, as they go on `vllm serve`."""
    return "  ".join(r.flag for r in finding.recommendations)


def progress(finding: Finding) -> str:
    """`budget-too-small: 8 of 15 s`: held so far of what the rule needs in all."""
    return f"{finding.rule}: {held_of(finding)}"


def held_of(finding: Finding) -> str:
    """`8 of 15 s, decisive`: `held_s` of `held_s + needs_s`, which is `for_s` as the engine
    sets it (`for_s` alone where the wait is not a matter of time), and the path it counts on:
    when the evidence turns decisive or falls back to borderline, the total changes with the
    word that says why."""
    total = finding.for_s if finding.needs_s is None else finding.held_s + finding.needs_s
    path = f", {finding.path}" if finding.path else ""
    return f"{finding.held_s:.0f} of {total:.0f} s{path}"


def waits_for(finding: Finding) -> str:
    """What an accruing finding still needs: `8 of 15 s`, or `7 of 20 finished requests`."""
    if finding.state == "pending" and finding.needs_s is not None:
        return held_of(finding)
    return ", ".join(finding.missing) or held_of(finding)


def likely(findings: Sequence[Finding] | None) -> Finding | None:
    """The likely cause while no verdict is in: None when a finding fires, else the first
    finding of warning level or worse whose evidence is still accruing: one due within
    `HOLD_BACK_S` first (it is about to be the verdict; a rule minutes from its verdict,
    replica-imbalance's three minutes, is a weaker guess), then pending before
    insufficient, then by severity; the input order, the rules' root-cause order, breaks
    ties."""
    found = list(findings or ())
    if any(f.state == "firing" for f in found):
        return None
    rank = {state: i for i, state in enumerate(ACCRUING)}
    accruing = [f for f in found if f.state in rank and f.severity >= Severity.WARNING]
    if not accruing:
        return None

    def key(f: Finding) -> tuple[bool, int, int]:
        due = f.needs_s is not None and f.needs_s <= HOLD_BACK_S
        return (not due, rank[f.state], -int(f.severity))

    return min(accruing, key=key)


def likely_line(finding: Finding) -> Line:
    """`likely budget-too-small · 8 of 15 s`, with the rule's title after it where it fits.
    No advice: a likely cause is not a verdict."""
    text = f"likely {finding.rule} · {waits_for(finding)}"
    return Line(
        "likely",
        text,
        finding.severity,
        finding,
        "?",
        wide=f"{text} · {finding.title}" if finding.title else "",
    )


SEPARATOR = re.compile(r"(?<!\bvllm): ")
"""Where what failed ends and why begins: the first `: ` that is not vLLM's series prefix
(`…/metrics has no vllm: series` broke at that colon, and dropped it: "has no vllm" then
"series …" on the next line)."""


def error_lines(error: str | None) -> list[Line]:
    """What failed and where on one line; why, and the hint, on the next (after the URL's `: `).

    On one line, the part after the URL is what a narrow terminal cuts off first, and it is the
    part the user needs ("connection refused"; 401: "set VTOP_API_KEY").
    """
    if not error:
        return []
    split = SEPARATOR.search(error)
    what, sep, why = (
        (error[: split.start()], ": ", error[split.end() :]) if split else (error, "", "")
    )
    out = [Line("error", what if sep else error, Severity.CRITICAL, label="DOWN")]
    if sep:
        out.append(Line("error", why, Severity.CRITICAL, label=""))
    return out


def judging(watched_s: float, quickest_s: float) -> str | None:
    """`judging: 4 of 10 s`, while less has been watched than the quickest verdict needs: no
    rule could have spoken yet, so "no bottleneck found" would be a guess (a report says
    UNKNOWN then, `report.collect`); None once an all-clear means something."""
    if watched_s >= quickest_s:
        return None
    return f"judging: {watched_s:.0f} of {quickest_s:.0f} s before an all-clear"


def lines(
    findings: Sequence[Finding] | None,
    *,
    error: str | None = None,
    polls: int = 0,
    watched_s: float = math.inf,
    quickest_s: float = 0.0,
) -> list[Line]:
    """Every line of the panel, top first (`findings` None: no triage engine runs here);
    `watched_s` of history against the `quickest_s` any warning needs (`judging`)."""
    out: list[Line] = []
    if findings is None:
        out += error_lines(error)
        out.append(
            Line("info", "triage rules are not loaded in this build: signals only", label="–")
        )
        return out
    out += error_lines(error)
    cause = None if error else likely(findings)
    for f in order(findings):
        if f is cause:
            continue  # its own line leads the panel
        if f.state == "firing":
            # The rule's summary is the diagnosis with its numbers; the title is in the detail.
            # The rule's id leads, as on every line: what `--rules` and the detail name.
            out.append(
                Line(
                    "firing", f"{f.rule}: {f.summary or f.title}", f.severity, f, LABELS[f.severity]
                )
            )
            fix = flags(f)
            if fix:
                # The flag once: the engine argument it sets is in the detail (`engine`).
                out.append(Line("action", f"→ {fix}", f.severity, f))
            else:
                out.append(Line("action", "→ no flag change: see details", f.severity, f))
        elif f.state == "pending":
            # No advice line: a pending finding carries none, and is drawn dimmed.
            out.append(Line("pending", f"{progress(f)}  {f.title}", f.severity, f, "…"))
        elif f.state == "insufficient":
            out.append(Line("insufficient", f"{f.rule}: {f.summary}", f.severity, f, "…"))
        else:
            why = f"explained by {f.suppressed_by}" if f.suppressed_by else "suppressed"
            out.append(Line("suppressed", f"{f.rule}: {why}", f.severity, f, "·"))
    if cause is not None:
        out.insert(0, likely_line(cause))
    elif not any(line.kind == "firing" for line in out) and not error:
        if polls < 2:
            out.insert(0, Line("info", "collecting the first polls…", label="…"))
        elif any(f.state in ACCRUING and f.severity < Severity.INFO for f in findings):
            # A rule without a level of its own (none ships) waits: not all-clear either.
            out.insert(0, Line("info", "gathering evidence before judging", label="…"))
        elif (wait := judging(watched_s, quickest_s)) is not None:
            out.insert(0, Line("info", wait, label="…"))
        else:
            out.insert(0, Line("ok", "no bottleneck found", label="OK"))
    return out


def recommended_flags(findings: Sequence[Finding] | None) -> str:
    """Every firing finding's flags, each flag once, in severity order."""
    seen: list[str] = []
    for f in order(findings or ()):
        if f.state != "firing":
            continue
        for r in f.recommendations:
            if r.flag not in seen:
                seen.append(r.flag)
    return " ".join(seen)
