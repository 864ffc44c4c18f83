"""`FieldsWidget` draws a changed field from its spans directly (`_runs`): the same segments as
Textual's own `Content.render`, for every make-up a field has, in every theme."""

from __future__ import annotations

import random

from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.content import Content, Span

from vtop.ui.widgets.fields import Field, FieldsWidget

STYLES = [
    "bold",
    "$text-muted",
    "bold $error",
    "bold reverse $error",
    "$warning",
    "italic",
    "$accent on $panel",
    "underline $success",
]
WORDS = ["67 / 256 req", "█▇▅", "p50 15s", " ", "·", "queue 12.9s (97%)", "é", "x"]


def reference(widget: FieldsWidget, content: Content) -> list[Segment]:
    base = widget.visual_style
    segments = [
        Segment(text, style.rich_style)
        for text, style in content.render(base, "", parse_style=widget._get_style)
    ]
    return [s for s in Segment.simplify(segments) if s.text]


def made_up(rng: random.Random) -> Content:
    """Text with adjacent, gapped, empty or nested spans, in any order."""
    text = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5)))
    spans: list[Span] = []
    at = 0
    while at < len(text) and rng.random() < 0.8:
        start = rng.randint(at, len(text))
        end = rng.randint(start, len(text))
        spans.append(Span(start, end, rng.choice(STYLES)))
        at = end if rng.random() < 0.85 else max(0, start - 1)  # now and then an overlap
    if rng.random() < 0.1:
        spans.reverse()
    return Content(text, spans)


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield FieldsWidget(id="fields")


async def test_runs_draw_what_content_render_draws_in_every_theme() -> None:
    app = Host()
    rng = random.Random(5)
    async with app.run_test(size=(60, 4)) as pilot:
        widget = app.query_one(FieldsWidget)
        fast = 0
        for theme in ("textual-dark", "textual-light", "nord"):
            app.theme = theme
            await pilot.pause()
            widget._styles_key, widget._styles = None, {}
            for _ in range(400):
                content = made_up(rng)
                runs = widget._runs(content, widget.visual_style)
                if runs is None:  # overlapping or unordered spans: Content.render draws them
                    continue
                fast += 1
                assert [s for s in Segment.simplify(runs) if s.text] == reference(widget, content)
        assert fast > 800  # the usual make-up takes the fast road


async def test_a_line_is_its_fields_each_exactly_its_width() -> None:
    app = Host()
    async with app.run_test(size=(30, 4)) as pilot:
        widget = app.query_one(FieldsWidget)
        widget.place(
            {
                "a": Field(0, 2, 6),
                "wide": Field(0, 9, 4),
                "b": Field(0, 15, 6, "right"),
                "cut": Field(1, 26, 10),
            }
        )
        widget.put("a", Content.styled("value", "bold $error"))
        widget.put("wide", "日本語")  # 6 cells in 4: 日 and the ellipsis fill 3, a space the 4th
        widget.put("b", "42")
        widget.put("cut", "past the right edge")
        await pilot.pause()
        for y in (0, 1):
            strip = widget.render_line(y)
            assert strip.cell_length == 30
            assert strip.cell_length == sum(s.cell_length for s in strip)
        line = "".join(s.text for s in widget.render_line(0))
        assert line.startswith("  value  日") and line.endswith("…  " + "    42" + " " * 9)
        assert "".join(s.text for s in widget.render_line(1)).endswith(" past")
