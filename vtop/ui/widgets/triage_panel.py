"""The verdict: firing findings with their fixes, pending ones dimmed with their progress.

While no verdict is in, the likely cause leads (`?  likely budget-too-small · 8 of 15 s`):
its label in the severity's colour but not reversed, its text in italics, so it reads as a
guess beside a verdict's reversed `WARN`, and the words `?`/`likely` say so without colour
(NO_COLOR, a mono terminal).

A focusable list: up/down move a cursor over the findings, Enter (or a double click) posts
`Selected` and the app opens the finding's detail screen. It shows the lines that fit, keeps
the cursor in view, and says how many more there are. Each line is a field, so a pending
finding whose progress ticks ("40 of 60 s" -> "41 of 60 s") repaints that one line.

The cursor is a glyph, `▶`, in a column of its own left of the labels (the panel's left
padding: no text column is lost), on the first row of the finding it is on: a glyph reads in
every theme, on a mono terminal and with NO_COLOR, where a background tint (the first cursor,
`$boost`: 234 on 233 in the dark theme) was nearly invisible. It shows while the panel has
the focus, that is while Enter opens what it points at.

The cursor starts on the first finding, the one the panel leads with (the likely cause, then
the verdict: the root cause, never a symptom it explains), and stays on the finding the user
moved it to (by its rule) while the list changes, until a new finding takes the lead: the
rule seen first after attaching is often a symptom, and Enter should open the likely cause,
then the verdict, that took the lead since.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.message import Message

from vtop.model import Finding, Severity
from vtop.ui.verdict import Line
from vtop.ui.widgets.fields import Field, FieldsWidget

LABEL_STYLE = {
    Severity.CRITICAL: "bold reverse $error",
    Severity.WARNING: "bold reverse $warning",
    Severity.INFO: "bold $primary",
    Severity.OK: "bold $success",
}
LIKELY_STYLE = {
    Severity.CRITICAL: "bold $error",
    Severity.WARNING: "bold $warning",
    Severity.INFO: "bold $primary",
    Severity.OK: "bold $text-muted",
}
"""A likely cause's label: the colour of the severity it would fire at, never reversed (a
reversed label is a verdict)."""
LABEL_W = 5
GUTTER = 1
"""The cursor's column, left of the labels (taken from the panel's left padding)."""
CURSOR = "▶"
CURSOR_STYLE = "bold $accent"


def short_form(line: Line) -> str:
    """A firing finding's diagnosis where it has no room: its rule and title, which read
    whole where the diagnosis would be cut (`memory-ceiling: KV cache is the wall`)."""
    f = line.finding
    if line.kind != "firing" or f is None or not f.title:
        return ""
    return f"{f.rule}: {f.title}"


def one_line(line: Line, action: Line, room: int) -> str:
    """A firing finding and its flags in one row, where the panel has fewer rows than lines:
    severity (the label), rule and the change (`memory-ceiling → --max-num-seqs 104`), or
    where that is too long, its rule and title, or its rule."""
    f = line.finding
    rule = f.rule if f is not None else line.text
    forms = [f"{rule} {action.text}", short_form(line), rule]
    return next((form for form in forms if form and len(form) <= room), rule)


def fold(lines: Sequence[Line], room: int) -> list[tuple[int, Line]]:
    """The lines with each firing finding's flags folded into its own line (`one_line`), each
    with the index of the line it stands for."""
    out: list[tuple[int, Line]] = []
    for i, line in enumerate(lines):
        if line.kind == "action" and out and out[-1][1].finding is line.finding:
            continue  # folded into its finding's line
        after = lines[i + 1] if i + 1 < len(lines) else None
        if line.kind == "firing" and after is not None and after.kind == "action":
            line = replace(line, text=one_line(line, after, room), wide="")
        out.append((i, line))
    return out


def line_rows(line: Line, width: int) -> list[str]:
    """A line's text wrapped to the panel's text column: its wide form (flags with their
    engine arguments) when that fits on one row, else its short form, wrapped."""
    room = width - GUTTER - LABEL_W
    text = line.wide if line.wide and len(line.wide) <= room else line.text
    if room <= 1 or len(text) <= room:
        return [text]
    return list(_wrapped(text, room, line.kind == "action"))


@lru_cache(maxsize=64)
def _wrapped(text: str, room: int, hanging: bool) -> tuple[str, ...]:
    # Cached: a changed verdict is wrapped three times a poll (old and new heights, drawing),
    # and most of its lines are the same text as the poll before.
    hang = "  " if hanging else ""  # under the flags, past the arrow
    rows = textwrap.wrap(text, room, subsequent_indent=hang, break_on_hyphens=False)
    return tuple(rows) or (text,)


def render_line(
    line: Line, width: int, cursor: bool, text: str | None = None, first: bool = True
) -> Content:
    """One row of the panel: the cursor's column (`▶` on the first row of the line the
    cursor is on), a severity label column (blank on a continuation), then the text (the
    line's own unless `text` is a wrapped piece of it), cut with … if too long."""
    label = line.label.ljust(LABEL_W - 1)[: LABEL_W - 1] + " " if first else " " * LABEL_W
    text = line.text if text is None else text
    room = width - GUTTER - LABEL_W
    if len(text) > room > 1:
        text = text[: room - 1] + "…"
    head: tuple[str, str]
    if line.kind == "firing":
        body, head = (text, "bold"), (label, LABEL_STYLE[line.severity])
    elif line.kind == "likely":
        body, head = (text, "italic"), (label, LIKELY_STYLE[line.severity])
    elif line.kind == "action":
        body, head = (text, "$accent"), (" " * LABEL_W, "")
    elif line.kind == "error":
        body, head = (text, "$error"), (label, "bold reverse $error" if line.label else "")
    elif line.kind == "ok":
        body, head = (text, ""), (label, LABEL_STYLE[Severity.OK])
    else:
        body, head = (text, "$text-muted"), (label, "$text-muted")
    if not first:
        head = (label, "")
    gutter = (CURSOR, CURSOR_STYLE) if cursor and first else (" " * GUTTER, "")
    return Content.assemble(gutter, head, body)


def _in_rows(line: Line, pieces: list[str], n: int, width: int) -> list[str]:
    """A wrapped line in the `n` rows it got, fewer than it needs: a firing finding's rule
    and title where they fit (`short_form`), else the rest of the text on the last row, cut."""
    short = short_form(line)
    if short:
        rows = line_rows(replace(line, text=short, wide=""), width)
        if len(rows) <= n:
            return rows
    indent = pieces[n - 1][: len(pieces[n - 1]) - len(pieces[n - 1].lstrip())]
    rest = indent + " ".join(p.strip() for p in pieces[n - 1 :])
    return [*pieces[: n - 1], rest]


def _rows_for(lines: Sequence[Line], width: int) -> int:
    return sum(len(line_rows(line, width)) for line in lines)


def allot(needs: Sequence[int], height: int) -> list[int] | None:
    """Rows for each line when every line gets at least one: the rows left over go to the
    lines that wrap, top first (the verdict before what is pending). None: not every line
    fits, so the panel scrolls a row per line."""
    if len(needs) > height:
        return None
    spare = height - len(needs)
    out = []
    for n in needs:
        more = min(max(0, n - 1), spare)
        spare -= more
        out.append(1 + more)
    return out


class TriagePanel(FieldsWidget, can_focus=True):
    """The findings of the selected endpoint."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("enter", "open", "Details"),
    ]

    DEFAULT_CSS = """
    TriagePanel { height: auto; }
    """

    class Selected(Message):
        """Enter was pressed on a finding."""

        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def __init__(self) -> None:
        super().__init__(id="triage")
        self.border_title = "Triage"
        self._lines: tuple[Line, ...] = ()
        self._cursor = 0
        self._chosen = False
        """The user moved the cursor: it follows their finding, not the lead."""
        self._lead: tuple[str, str] | None = None
        """The rule the panel leads with, and its state: when another takes the lead (or the
        likely cause becomes the verdict), the cursor goes to it."""
        self._row_line: list[int] = []
        """The line each drawn row belongs to (a wrapped line takes several)."""
        self._focused = False
        """The panel has the focus: the cursor shows (Enter opens what it is on)."""

    @property
    def lines(self) -> tuple[Line, ...]:
        return self._lines

    @property
    def selected(self) -> Finding | None:
        """The finding under the cursor."""
        if not self._lines:
            return None
        return self._lines[min(self._cursor, len(self._lines) - 1)].finding

    def show(self, lines: Sequence[Line]) -> None:
        new = tuple(lines)
        if new == self._lines:
            return
        keep = self.selected
        width = self.size.width
        # The height is what the lines take wrapped: the same number of lines can take
        # more rows or fewer ("39 of 60 s" -> "40 of 60 s" can wrap differently).
        resized = len(new) != len(self._lines) or (
            width > 0 and _rows_for(new, width) != _rows_for(self._lines, width)
        )
        self._lines = new
        self._cursor = self._place_cursor(keep)
        if resized:
            self.refresh(layout=True)
        self._draw()

    def _place_cursor(self, keep: Finding | None) -> int:
        """Keep the cursor on the rule the user chose when the list changes, else (or when
        a new finding takes the lead) on the first finding."""
        lead = self._lead_index()
        f = self._lines[lead].finding if lead < len(self._lines) else None
        now = (f.rule, f.state) if f is not None else None
        if now != self._lead:
            self._lead, self._chosen = now, False  # news: the cursor goes to it
        if keep is not None and self._chosen:
            for i, line in enumerate(self._lines):
                if line.finding is not None and line.finding.rule == keep.rule:
                    return i
        self._chosen = False  # their finding is gone: follow the lead again
        return lead

    def _lead_index(self) -> int:
        """The first line with a finding (the likely cause, or the top verdict)."""
        return next((i for i, line in enumerate(self._lines) if line.finding is not None), 0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Every row the lines would take wrapped: the CSS max-height bounds it, and `_draw`
        # shares what it gets out, so a long verdict uses free rows before it is cut.
        return max(1, _rows_for(self._lines, width))

    def on_resize(self) -> None:
        self._draw()

    def on_focus(self) -> None:
        # Textual runs this handler before its own, which sets `has_focus`: hence a flag.
        self._focused = True
        self._draw()

    def on_blur(self) -> None:
        self._focused = False
        self._draw()

    def _draw(self) -> None:
        width, height = self.size
        if width <= 0 or height <= 0:
            return
        self.place({f"l{y}": Field(y, 0, width) for y in range(height)})
        wrapped = [line_rows(line, width) for line in self._lines]
        rows = allot([len(w) for w in wrapped], height)
        if rows is None:
            self._draw_scrolling(width, height)
            return
        self._row_line = []
        y = 0
        for i, (line, pieces, n) in enumerate(zip(self._lines, wrapped, rows, strict=True)):
            cursor = self._focused and i == self._cursor and line.finding is not None
            if n < len(pieces):
                pieces = _in_rows(line, pieces, n, width)
            for j, piece in enumerate(pieces[:n]):
                self.put(f"l{y}", render_line(line, width, cursor, piece, first=j == 0))
                self._row_line.append(i)
                y += 1
        for blank in range(y, height):
            self.put(f"l{blank}", "")

    def _draw_scrolling(self, width: int, height: int) -> None:
        """More lines than rows: a row per line, each finding's flags folded into its line
        (`fold`), and if that is still too many, the cursor kept in view and `+N more`
        under it (on one row, the cursor's line alone)."""
        folded = fold(self._lines, width - GUTTER - LABEL_W)
        at = max((n for n, (i, _) in enumerate(folded) if i <= self._cursor), default=0)
        top = 0
        if len(folded) > height and at >= height - 1:
            top = max(0, min(at - 1, len(folded) - height + 1)) if height > 1 else at
        shown = folded[top : top + height]
        more = len(folded) - (top + len(shown))
        if more > 0 and height > 1:
            shown = shown[:-1]
            more += 1
        self._row_line = [i for i, _ in shown]
        for y in range(height):
            if y < len(shown):
                i, line = shown[y]
                cursor = self._focused and i == self._cursor and line.finding is not None
                self.put(f"l{y}", render_line(line, width, cursor))
            elif y == len(shown) and more > 0:
                hint = f"  +{more} more (↑↓ to scroll, Enter for details)"
                self.put(f"l{y}", Content.styled(hint, "$text-muted"))
            else:
                self.put(f"l{y}", "")

    def action_move(self, step: int) -> None:
        """Move to the next line that is a different finding."""
        current = self.selected
        i = self._cursor
        while 0 <= i + step < len(self._lines):
            i += step
            f = self._lines[i].finding
            if f is not None and f is not current:
                self._choose(i)
                return

    def _choose(self, i: int) -> None:
        """The user put the cursor on line `i`, that is on its finding's first line (back on
        the lead: it follows the lead)."""
        f = self._lines[i].finding
        i = next((n for n, line in enumerate(self._lines) if line.finding is f), i)
        self._cursor = i
        self._chosen = i != self._lead_index()
        self._draw()

    def action_open(self) -> None:
        finding = self.selected
        if finding is not None:
            self.post_message(self.Selected(finding))

    def on_click(self, event: events.Click) -> None:
        i = self._row_line[event.y] if 0 <= event.y < len(self._row_line) else -1
        if 0 <= i < len(self._lines) and self._lines[i].finding is not None:
            self._choose(i)
            if event.chain >= 2:
                self.action_open()
