"""Enter on a finding: its evidence, the rule, and each recommendation's formula and inputs.

`c` here copies this finding's flags only.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from vtop.model import Finding
from vtop.ui import detail


class FindingScreen(ModalScreen[None]):
    """One finding in full."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("c", "copy", "Copy flags"),
    ]

    def __init__(self, finding: Finding, now: float | None) -> None:
        super().__init__()
        self.finding = finding
        self._now = now

    def compose(self) -> ComposeResult:
        with Vertical(id="finding", classes="dialog") as box:
            box.border_title = f"{self.finding.rule}"
            with VerticalScroll():
                yield Static("\n".join(detail.lines(self.finding, self._now)), markup=False,
                             id="finding-body")  # fmt: skip
            yield Static("[dim]Escape closes · c copies the flags[/dim]", classes="dialog-hint")

    def action_copy(self) -> None:
        flags = " ".join(r.flag for r in self.finding.recommendations)
        copy = getattr(self.app, "copy_flags", None)
        if callable(copy):
            copy(flags)
