"""`?` on the replay screen: the player's keys, then the dashboard's."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from vtop.ui.screens.help import KEYS, HelpScreen

REPLAY_KEYS: tuple[tuple[str, str], ...] = (
    ("space", "play / pause"),
    ("> <  ] [", "faster / slower: 1×, 2×, 5× … 1000×"),
    (". ,", "one poll forward / back (pauses)"),
    ("g", "go to a time: +5m, -10m, 1:30:00, 15:04 (UTC)"),
    ("n N", "next / previous place where a finding starts"),
)
TRAIN_KEYS: tuple[tuple[str, str], ...] = (
    ("a", "answer the open question (Escape hides it to study the screen)"),
)
SKIP = {"p", "+ / -", "r"}
"""Dashboard keys that mean something else, or nothing, in a replay."""


class ReplayHelpScreen(HelpScreen):
    """The key reference of the replay (and training) screen."""

    def __init__(self, *, training: bool = False) -> None:
        super().__init__()
        self.training = training

    def compose(self) -> ComposeResult:
        keys = [*REPLAY_KEYS, *(TRAIN_KEYS if self.training else ())]
        keys += [(k, what) for k, what in KEYS if k not in SKIP]
        with Vertical(id="help", classes="dialog") as box:
            box.border_title = "vtop replay keys"
            width = max(len(k) for k, _ in keys)
            lines: list[str | tuple[str, str]] = []
            for i, (k, what) in enumerate(keys):
                lines += ["\n" if i else "", (f"{k:<{width}}", "bold"), f"  {what}"]
            yield Static(Content.assemble(*lines))
            yield Static("Escape closes", classes="dialog-hint")
