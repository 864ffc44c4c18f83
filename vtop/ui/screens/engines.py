"""`b`: the selected endpoint's engines side by side (data parallelism, several models).

A table with one row per (model, engine) and the panels' current values, refreshed on every
poll while open. With one engine it says there is nothing to break down.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from vtop import durations
from vtop.ui import panels
from vtop.ui.panels import View

COLUMNS = ("running", "waiting", "kv", "preemptions", "generation", "ttft", "itl")


def engine_rows(view: View) -> list[tuple[str, ...]]:
    """One row per (model, engine): the panels' current values."""
    rows: list[tuple[str, ...]] = []
    for model, engine in view.store.engines():
        scoped = View(
            view.store, view.knobs, view.window_s, view.interval_s, model, engine, view.thresholds
        )
        cells = [model or "–", engine or "–"]
        for pid in COLUMNS:
            cells.append(panels.read(panels.BY_ID[pid], scoped).value)
        rows.append(tuple(cells))
    return rows


class EnginesScreen(ModalScreen[None]):
    """Per-engine breakdown."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,b", "dismiss", "Close")]

    def __init__(self, view: View) -> None:
        super().__init__()
        self._view = view

    def compose(self) -> ComposeResult:
        with Vertical(id="engines", classes="dialog") as box:
            box.border_title = "Engines"
            yield DataTable(id="engine-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="engines-note", classes="dialog-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("model", "engine", *(panels.BY_ID[c].short for c in COLUMNS))
        self.show(self._view)

    def show(self, view: View) -> None:
        self._view = view
        rows = engine_rows(view)
        table = self.query_one(DataTable)
        table.clear()
        for row in rows:
            # Text, not str: a str cell is read as Rich markup, and model and engine names are
            # the server's label values ("[@click=app.quit]" would be a link that quits).
            table.add_row(*(Text(cell) for cell in row))
        note = self.query_one("#engines-note", Static)
        if len(rows) <= 1:
            note.update(
                "one engine: nothing to break down (data parallelism shows one row "
                "per engine) · Escape closes"
            )
        else:
            note.update(
                f"{len(rows)} engines · window {durations.exact(view.window_s)} · Escape closes"
            )
