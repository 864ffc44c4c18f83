"""The text on a running app's screen, row by row, as a user would read it.

Read from Textual's own SVG screenshot (`App.export_screenshot`), the public way to see what
the terminal gets, modal screens and clipping included: a test that only read a widget's
content would pass while a box cut that content off.
"""

from __future__ import annotations

import html
import re

from textual.app import App

CELL_W = 12.2
"""Width of one cell in Textual's SVG (0.61 × its 20 px font)."""

_TEXT = re.compile(
    r'<text [^>]*?x="([\d.]+)"[^>]*?clip-path="url\(#[\w-]+-line-(\d+)\)">(.*?)</text>'
)


def screen_lines(app: App[object]) -> list[str]:
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


def screen_text(app: App[object]) -> str:
    return "\n".join(screen_lines(app))
