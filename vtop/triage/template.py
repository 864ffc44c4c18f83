"""`{name:spec}` text templates for summaries, evidence rows and trade-off notes.

The loader has already checked every placeholder is a plain name the rule defines (no
attribute or index access, no conversions), so rendering is `format()` of plain numbers,
strings and booleans; an unknown value renders as '–', never as 0 or "None". An evidence row
(`render_value`) whose every value is unknown is '–' alone: "– cores" or "– of polls" would
dress an unread number in a unit, as if it had been measured.
"""

from __future__ import annotations

import string
from collections.abc import Mapping

from vtop.triage.expr import Value


def _fmt(value: Value, spec: str) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool | str):
        return str(value)
    try:
        return format(value, spec)
    except (ValueError, TypeError):
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
