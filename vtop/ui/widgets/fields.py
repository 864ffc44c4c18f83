"""A widget made of named text fields at fixed places, repainted field by field.

This is where vtop's low cost comes from. Textual repaints whatever region is marked dirty,
and every repainted cell is bytes on the user's SSH link and CPU in the compositor. Here each
field (a value, one chart row, a note, a header item) owns a one-line rectangle; `put()`
compares the new text with what is on screen and, only when it differs, marks just that
rectangle dirty. A poll that changes one number repaints those few cells, not the panel, and
one widget draws a whole panel (no nest of containers to re-render under every change).

Subclasses decide the layout (`place`) from their size and fill the fields (`put`). Text is
Textual `Content`, so styles are theme variables (`$text-muted`, `bold $error`), resolved at
render time: themes and NO_COLOR keep working.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widget import Widget

Align = Literal["left", "right"]


@dataclass(frozen=True, slots=True)
class Field:
    """Where a field sits, in content cells: line `y`, from column `x`, `width` cells wide."""

    y: int
    x: int
    width: int
    align: Align = "left"


class FieldsWidget(Widget):
    """Named one-line fields; only changed fields are repainted."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._layout: dict[str, Field] = {}
        self._content: dict[str, Content] = {}
        self._by_line: dict[int, list[tuple[str, Field]]] = {}
        self._changed: list[Region] | None = None
        self._cache: dict[
            str, tuple[Content, tuple[Field, tuple[str, VisualStyle]], list[Segment]]
        ] = {}
        self._styles_key: tuple[str, VisualStyle] | None = None
        self._styles: dict[str | VisualStyle, RichStyle] = {}
        """Span styles resolved for the current theme and base style (see `_runs`)."""

    # -- for subclasses -----------------------------------------------------------------------

    def place(self, layout: Mapping[str, Field]) -> None:
        """Set where every field goes; a new layout repaints the whole widget."""
        if dict(layout) == self._layout:
            return
        self._layout = dict(layout)
        rows: dict[int, list[tuple[str, Field]]] = {}
        for name, f in self._layout.items():
            rows.setdefault(f.y, []).append((name, f))
        for fields in rows.values():
            fields.sort(key=lambda item: item[1].x)
        self._by_line = rows
        self.refresh()

    def put(self, name: str, text: Content | str) -> bool:
        """Show `text` in field `name`; repaints that field only, and only if it changed."""
        new = text if isinstance(text, Content) else Content(text)
        old = self._content.get(name)
        if old is not None and old.plain == new.plain and list(old.spans) == list(new.spans):
            return False
        self._content[name] = new
        f = self._layout.get(name)
        if f is None or not self.is_mounted:
            return True
        if self._changed is not None:
            self._changed.append(Region(f.x, f.y, f.width, 1))
        else:
            self.refresh(Region(f.x, f.y, f.width, 1))
        return True

    @contextmanager
    def repaint_once(self) -> Iterator[None]:
        """The fields put inside repaint together at the end: one refresh, not one each (a
        refresh costs about as much as drawing the field)."""
        if self._changed is not None:  # already inside one
            yield
            return
        self._changed = []
        try:
            yield
        finally:
            changed, self._changed = self._changed, None
            if changed:
                self.refresh(*changed)

    def text(self, name: str) -> str:
        """The plain text of a field (what tests and the explain screen read)."""
        content = self._content.get(name)
        return content.plain if content is not None else ""

    def shown(self, name: str) -> bool:
        """True when the field has a place in the current layout."""
        return name in self._layout

    def room(self, name: str) -> int:
        """The width of a field in the current layout (a field left out: none, so a text
        with shorter forms picks its shortest, `room.fitting`)."""
        f = self._layout.get(name)
        return f.width if f is not None else 0

    # -- rendering ------------------------------------------------------------------------------

    def line(self, y: int) -> Content:
        """Line `y` as content: its fields, each cut or padded to its width."""
        parts: list[Content | str] = []
        at = 0
        for name, f in self._by_line.get(y, ()):
            if f.x > at:
                parts.append(" " * (f.x - at))
            content = self._content.get(name, Content(""))
            if content.cell_length > f.width:
                content = content.truncate(f.width, ellipsis=True)
            elif f.align == "right":
                content = content.pad_left(f.width - content.cell_length)
            else:
                content = content.truncate(f.width, pad=True)
            parts.append(content)
            at = f.x + f.width
        return Content.assemble(*parts)

    def render_line(self, y: int) -> Strip:
        """Line `y` as segments, from per-field segments cached until the field changes."""
        width = self.size.width
        base = self.visual_style
        key = (self.app.theme, base)
        if key != self._styles_key:  # a new theme, or base style: resolve styles afresh
            self._styles_key, self._styles = key, {}
        blank = base.rich_style
        segments: list[Segment] = []
        at = 0
        for name, f in self._by_line.get(y, ()):
            if f.x >= width:
                break
            if f.x > at:
                segments.append(Segment(" " * (f.x - at), blank))
            segments.extend(self._segments(name, f, key))
            at = f.x + f.width
        if at < width:
            segments.append(Segment(" " * (width - at), blank))
        # One escape sequence per run of equal style, not per field: fewer bytes on the link.
        # Every field is exactly its width (`_segments`), so the line's length is known.
        strip = Strip(Segment.simplify(segments), cell_length=max(at, width))
        return strip if at <= width else strip.crop(0, width)

    def _segments(self, name: str, f: Field, key: tuple[str, VisualStyle]) -> list[Segment]:
        content = self._content.get(name, Content(""))
        cached = self._cache.get(name)
        if cached is not None and cached[0] is content and cached[1] == (f, key):
            return cached[2]
        if content.cell_length > f.width:
            fitted = content.truncate(f.width, ellipsis=True)
        elif f.align == "right":
            fitted = content.pad_left(f.width - content.cell_length)
        else:
            fitted = content.truncate(f.width, pad=True)
        if fitted.cell_length < f.width:  # a wide character that did not fit whole
            fitted = fitted.pad_right(f.width - fitted.cell_length)
        segments = self._runs(fitted, key[1])
        if segments is None:
            segments = [
                Segment(text, style.rich_style)
                for text, style in fitted.render(key[1], "", parse_style=self._get_style)
            ]
        self._cache[name] = (content, (f, key), segments)
        return segments

    def _runs(self, content: Content, base: VisualStyle) -> list[Segment] | None:
        """`content` as segments when its spans do not overlap (a field's usual make-up: one
        style per run of text), each span's style resolved once per theme; None otherwise.

        What `Content.render` yields for such content, without parsing every style of every
        changed field again: a poll changes a dozen fields, and that parsing was half of what
        drawing them cost.
        """
        text = content.plain
        segments: list[Segment] = []
        at = 0
        for span in content.spans:
            if span.start < at or span.end > len(text):
                return None
            if span.start > at:
                segments.append(Segment(text[at : span.start], base.rich_style))
                at = span.start
            if span.end > span.start:
                raw = span.style
                style = self._styles.get(raw)
                if style is None:
                    parsed = self._get_style(raw) if isinstance(raw, str) else raw
                    style = self._styles[raw] = VisualStyle.combine([base, parsed]).rich_style
                segments.append(Segment(text[span.start : span.end], style))
                at = span.end
        if at < len(text):
            segments.append(Segment(text[at:], base.rich_style))
        return segments
