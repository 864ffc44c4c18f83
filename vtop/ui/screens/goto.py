"""`g`: go to a time of the trace, typed; a time it cannot read keeps the dialog open and says why.

Reading the text is `vtop.ui.views.player.target`'s job (the same forms as `--from`); this screen
only asks, shows the error, and hands back the time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

HINT = "+5m or +1:30:00 from the start · -10m from the end · 15:04[:05] UTC · an ISO time"


class GoToScreen(ModalScreen[float | None]):
    """Ask for a time; dismisses with it (None: cancelled)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, parse: Callable[[str], float], where: str) -> None:
        super().__init__()
        self._parse = parse
        self._where = where

    def compose(self) -> ComposeResult:
        with Vertical(id="goto", classes="dialog") as box:
            box.border_title = "go to"
            yield Static(f"now at {self._where}", id="goto-where")
            yield Input(placeholder="+5m", id="goto-input")
            yield Static(HINT, id="goto-error", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            t = self._parse(event.value)
        except ValueError as exc:
            error = self.query_one("#goto-error", Static)
            error.update(str(exc))
            error.add_class("-error")
            return
        self.dismiss(t)
