"""`?`: every key, in one modal; Escape, `q` or `?` closes it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, str], ...] = (
    ("?", "this help"),
    ("q", "quit"),
    ("p", "pause / resume the screen (polling and triage go on)"),
    ("+ / -", "poll more / less often (0.5 s … 30 s)"),
    ("w", "window of charts and statistics: 1m, 5m, 15m, 1h"),
    ("e", "explain the focused panel: what it means, what moves it"),
    ("enter", "the finding under the cursor (▶): evidence, formula, inputs"),
    ("c", "copy the recommended flags (OSC 52 clipboard)"),
    ("b", "per-engine breakdown (data parallelism)"),
    ("1-9", "choose an endpoint (several --url)"),
    ("tab", "next panel; arrows move inside it"),
    ("r", "start / stop recording a trace (vtop --replay FILE plays it)"),
    ("ctrl+p", "command palette"),
)


class HelpScreen(ModalScreen[None]):
    """The key reference."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog") as box:
            box.border_title = "vtop keys"
            width = max(len(k) for k, _ in KEYS)
            yield Static("\n".join(f"[b]{k:<{width}}[/b]  {what}" for k, what in KEYS), markup=True)
            yield Static("[dim]Escape closes[/dim]", classes="dialog-hint")
