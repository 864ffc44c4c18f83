"""`{name:spec}` text templates for summaries, evidence rows and trade-off notes.

The loader has already checked every placeholder is a plain name the rule defines (no
attribute or index access, no conversions), so rendering is `format()` of plain numbers,
strings and booleans; an unknown value renders as '–', never as 0 or "None". An evidence row
(`render_value`) whose every value is unknown is '–' alone: "– cores" or "– of polls" would
dress an unread number in a unit, as if it had been measured.

What a template renders is bounded (`vtop.triage.cost`): the loader allows only number
formats of a small width and precision, and a text value (a knob read off a server's command
line) renders at most `MAX_TEXT_CHARS` long, so no summary grows past a few kilobytes.

A window an evidence row names in parentheses, `(5 min)` or `(30 s)`, is the one its measure
asks for; over a younger history the measure covers less, and `covered` says how much
(`(last 42 s)`), so a 30 s report does not claim five minutes of evidence.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping

from vtop import durations
from vtop.triage.cost import MAX_INT, MAX_TEXT_CHARS, format_spec_problem
from vtop.triage.expr import Value

_WINDOW = re.compile(r"\((\d+(?:\.\d+)?) (min|s)\)")


def _fmt(value: Value, spec: str) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool | str):
        text = str(value)
        return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        value = float(value) if abs(value) < 1e308 else None
        if value is None:
            return "–"
    if format_spec_problem(spec) is not None:  # the loader refused it; never pad a gigabyte
        spec = ""
    try:
        return format(value, spec)
    except (ValueError, TypeError, OverflowError):
        return str(value)


def render(template: str, names: Mapping[str, Value]) -> str:
    """Fill the placeholders of `template` from `names`."""
    out: list[str] = []
    for literal, field_name, spec, _ in string.Formatter().parse(template):
        out.append(literal)
        if field_name is not None:
            out.append(_fmt(names.get(field_name), spec or ""))
    return "".join(out)


def render_value(template: str, names: Mapping[str, Value]) -> str:
    """An evidence row: as `render`, but '–' alone when it names values and none is known."""
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    if fields and all(names.get(f) is None for f in fields):
        return "–"
    return render(template, names)


def covered(text: str, history_s: float) -> str:
    """`text` with each parenthesised window longer than the history, `(5 min)`, read as the
    span the history covers: `(last 42 s)`."""

    def span(m: re.Match[str]) -> str:
        window = float(m[1]) * (60.0 if m[2] == "min" else 1.0)
        return m[0] if history_s >= window - 0.5 else f"(last {durations.span(history_s)})"

    return _WINDOW.sub(span, text)
