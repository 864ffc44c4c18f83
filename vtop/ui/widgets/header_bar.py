"""The top line: which endpoint, model and version, uptime, connection, poll cost, vtop's cost.

Made of `TextCell`s so that the one field that changes every poll (the poll latency) repaints
a few cells, not the whole line.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal

from vtop.ui.headline import Headline
from vtop.ui.widgets.text_cell import TextCell


class HeaderBar(Horizontal):
    """vtop's header."""

    def __init__(self) -> None:
        super().__init__(id="header")
        self.cells = {
            name: TextCell("", id=f"hdr-{name}")
            for name in ("brand", "endpoint", "model", "version", "uptime", "status",
                         "latency", "cadence", "cost")
        }  # fmt: skip
        self.cells["brand"].show("vtop")

    def compose(self) -> ComposeResult:
        yield from self.cells.values()

    def show(self, head: Headline | None, *, cadence: str, cost: str) -> None:
        c = self.cells
        if head is not None:
            c["endpoint"].show(head.endpoint)
            c["model"].show(head.model)
            c["version"].show(head.version)
            c["uptime"].show(head.uptime)
            c["status"].show(head.status)
            c["status"].set_level(head.status_level)
            c["latency"].show(head.latency)
            c["latency"].set_level(head.latency_level)
        c["cadence"].show(cadence)
        c["cost"].show(cost)
