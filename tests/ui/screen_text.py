"""The text on a running app's screen, row by row, as a user would read it.

Read from Textual's own SVG screenshot (`App.export_screenshot`), the public way to see what
the terminal gets, modal screens and clipping included: a test that only read a widget's
content would pass while a box cut that content off.
"""

from __future__ import annotations

import html
import re
from typing import Any

from textual._compositor import CompositorUpdate
from textual.app import App

CELL_W = 12.2
"""Width of one cell in Textual's SVG (0.61 × its 20 px font)."""

_TEXT = re.compile(
    r'<text [^>]*?x="([\d.]+)"[^>]*?clip-path="url\(#[\w-]+-line-(\d+)\)">(.*?)</text>'
)


def screen_lines(app: App[Any]) -> list[str]:
    """Every row of the screen as plain text (trailing blanks removed)."""
    svg = app.export_screenshot()
    rows: dict[int, list[str]] = {}
    for x, line, text in _TEXT.findall(svg):
        row = rows.setdefault(int(line), [])
        col = round(float(x) / CELL_W)
        chars = html.unescape(text).replace("\xa0", " ")
        if len(row) < col + len(chars):
            row.extend(" " * (col + len(chars) - len(row)))
        row[col : col + len(chars)] = chars
    height = app.size.height
    return ["".join(rows.get(y, [])).rstrip() for y in range(height)]


def screen_text(app: App[Any]) -> str:
    return "\n".join(screen_lines(app))


_SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def terminal_bytes(app: App[Any]) -> str:
    """Everything Textual would write to the terminal to draw the screen from scratch: the
    characters and the escape sequences (the `terminal` fixture of tests/hardening)."""
    screen = app.screen
    update = screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    assert isinstance(update, CompositorUpdate), "a full update always renders"
    return update.render_segments(app.console)


def colour_codes(terminal: str) -> set[str]:
    """The SGR parameters in `terminal` that set a colour: 30-37, 40-47, 90-97, 100-107 and the
    38/48 forms (256 colours, truecolor). 39 and 49, the terminal's default colours, are none."""
    found: set[str] = set()
    for params in _SGR.findall(terminal):
        parts = params.replace(":", ";").split(";")
        i = 0
        while i < len(parts):
            p = parts[i]
            if p in ("38", "48"):
                width = 5 if parts[i + 1 : i + 2] == ["2"] else 3
                found.add(";".join(parts[i : i + width]))
                i += width
                continue
            if p.isdigit() and (30 <= int(p) <= 37 or 40 <= int(p) <= 47 or 90 <= int(p) <= 107):
                found.add(p)
            i += 1
    return found
