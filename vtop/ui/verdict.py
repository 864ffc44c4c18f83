"""The triage panel's lines, from findings (no Textual here).

Order is what a user should read first: firing findings by severity (critical first), then
pending ones (dimmed, with how long their condition has held of how long the rule waits),
then suppressed ones (explained by a root cause, so they give no advice), then the rules
whose condition holds but which wait for more evidence (too few polls since a restart). A
firing finding takes two lines: what is wrong, then the flags that fix it (with the engine
arguments they set where the width allows). With nothing firing the panel still says
something useful: that the rules hold, that they are gathering evidence, or that the server
cannot be reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from vtop.model import Finding, Severity

LineKind = Literal["firing", "action", "pending", "suppressed", "insufficient", "ok", "error",
                   "info"]  # fmt: skip

LABELS = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO",
          Severity.OK: "OK"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the triage panel; `finding` is what Enter on it opens."""

    kind: LineKind
    text: str
    severity: Severity = Severity.OK
    finding: Finding | None = None
    label: str = ""
    wide: str = ""
    """The same line with more in it, shown instead where it fits on one row (the flags with
    the engine arguments they set, on wide terminals)."""


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


def flags_and_args(finding: Finding) -> str:
    """`--max-num-seqs 104 (max_num_seqs=104)`: each flag with the engine argument it sets,
    for those who start vLLM from Python (`LLM(...)`, `AsyncEngineArgs`)."""
    return "  ".join(f"{r.flag} ({r.engine_arg})" for r in finding.recommendations)


def progress(finding: Finding) -> str:
    """`budget-too-small: 40 of 60 s`."""
    return f"{finding.rule}: {finding.held_s:.0f} of {finding.for_s:.0f} s"


def error_lines(error: str | None) -> list[Line]:
    """What failed and where on one line; why, and the hint, on the next (after the URL's `: `).

    On one line, the part after the URL is what a narrow terminal cuts off first, and it is the
    part the user needs ("connection refused"; 401: "set VTOP_API_KEY").
    """
    if not error:
        return []
    what, sep, why = error.partition(": ")
    out = [Line("error", what if sep else error, Severity.CRITICAL, label="DOWN")]
    if sep:
        out.append(Line("error", why, Severity.CRITICAL, label=""))
    return out


def lines(findings: Sequence[Finding] | None, *, error: str | None = None,
          polls: int = 0) -> list[Line]:  # fmt: skip
    """Every line of the panel, top first (`findings` None: no triage engine runs here)."""
    out: list[Line] = []
    if findings is None:
        out += error_lines(error)
        out.append(Line("info", "triage rules are not loaded in this build: signals only",
                        label="–"))  # fmt: skip
        return out
    out += error_lines(error)
    for f in order(findings):
        if f.state == "firing":
            # The rule's summary is the diagnosis with its numbers; the title is in the detail.
            out.append(Line("firing", f.summary or f.title, f.severity, f, LABELS[f.severity]))
            fix = flags(f)
            if fix:
                out.append(Line("action", f"→ {fix}", f.severity, f,
                                wide=f"→ {flags_and_args(f)}"))  # fmt: skip
            else:
                out.append(Line("action", "→ no flag change: see details", f.severity, f))
        elif f.state == "pending":
            out.append(Line("pending", f"{progress(f)}  {f.title}", f.severity, f, "…"))
        elif f.state == "insufficient":
            out.append(Line("insufficient", f"{f.rule}: {f.summary}", f.severity, f, "…"))
        else:
            why = f"explained by {f.suppressed_by}" if f.suppressed_by else "suppressed"
            out.append(Line("suppressed", f"{f.rule}: {why}", f.severity, f, "·"))
    if not any(line.kind == "firing" for line in out) and not error:
        if polls < 2:
            out.insert(0, Line("info", "collecting the first polls…", label="…"))
        elif any(line.kind == "insufficient" for line in out):
            out.insert(0, Line("info", "gathering evidence before judging", label="…"))
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
