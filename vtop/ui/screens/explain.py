"""`e`: what the focused panel's signal means and what moves it, from the signal catalog.

The text is the catalog's own `help`, the same words `vtop --report` and the docs use, plus
the wire names vLLM gives the signal across versions and the thresholds that colour it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from vtop.signals.catalog import BY_NAME
from vtop.ui.views.thresholds import FALLBACK, Table


def explain_text(
    title: str, signals: Sequence[str], extra: str = "", table: Table = FALLBACK
) -> Content:
    parts: list[str | tuple[str, str]] = []
    for i, name in enumerate(signals):
        sig = BY_NAME.get(name)
        if sig is None:
            continue
        if i:
            parts.append("\n\n")
        unit = f" ({sig.unit})" if sig.unit else ""
        parts.append((f"{sig.name}{unit}\n", "bold"))
        parts.append(sig.help)
        if sig.aliases:
            parts.append(("\nvLLM names: " + ", ".join(sig.aliases), "$text-muted"))
        th = table.get(name)
        if th is not None:
            parts.append((f"\nColoured {th.describe()} ({th.source}).", "$text-muted"))
    if extra:
        parts.append("\n\n" + extra)
    return Content.assemble(*parts)


class ExplainScreen(ModalScreen[None]):
    """The meaning of one panel."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,e", "dismiss", "Close")]

    def __init__(self, title: str, body: Content) -> None:
        super().__init__()
        self._title = title
        self._body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="explain", classes="dialog") as box:
            box.border_title = self._title
            with VerticalScroll():
                yield Static(self._body, id="explain-body")
            yield Static("[dim]Escape closes[/dim]", classes="dialog-hint")
