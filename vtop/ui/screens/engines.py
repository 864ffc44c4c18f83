"""`b`: the selected endpoint's engines side by side (data parallelism, several models).

A table with one row per (model, engine) and the panels' current values, refreshed on every
poll while open. With one engine it says there is nothing to break down.

The columns that fit the dialog are shown, the least important left out first (`KEEP`), as
the fleet rows do: a table wider than its box (it was, even at 120 columns: each latency cell
held `p50 15.4s p99 37.3s`) scrolled sideways and hid the engines' tail latency. Each
percentile is a column of its own, so 80 columns keep the p99s and leave out the p50s. The
model column shows only where the endpoint serves several models, as wide as the rest allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from vtop import durations, figures, fmt
from vtop.ui import panels
from vtop.ui.panels import View


@dataclass(frozen=True, slots=True)
class Column:
    id: str
    header: str
    width: int


COLUMNS = (
    Column("running", "running", 9),
    Column("waiting", "wait", 5),
    Column("kv", "KV", 6),
    Column("preemptions", "pre/s", 5),
    Column("generation", "tok/s", 5),
    Column("ttft50", "TTFT p50", 8),
    Column("ttft99", "TTFT p99", 8),
    Column("itl50", "ITL p50", 7),
    Column("itl99", "ITL p99", 7),
)
"""The figures, in the order they are shown; widths fit what `fmt` writes."""
KEEP = (
    "running",
    "kv",
    "ttft99",
    "waiting",
    "generation",
    "itl99",
    "preemptions",
    "ttft50",
    "itl50",
)
"""Which figures stay, most important first: the rest (the p50s, then preemptions) give way."""
PADDING = 2
"""A DataTable cell's padding, one column each side."""
ESSENTIAL = 3
"""The figures the model's column leaves room for: running, KV usage and TTFT p99."""
MODEL_MIN, MODEL_MAX = 12, 40
ENGINE_MIN = 6


def engine_rows(view: View) -> list[dict[str, str]]:
    """One row per (model, engine): the panels' current values, each percentile apart."""
    rows: list[dict[str, str]] = []
    for model, engine in view.store.engines():
        scoped = View(
            view.store, view.knobs, view.window_s, view.interval_s, model, engine, view.thresholds
        )
        cells = {"model": model or fmt.DASH, "engine": engine or fmt.DASH}
        for pid in ("running", "waiting", "kv", "preemptions", "generation"):
            cells[pid] = panels.read(panels.BY_ID[pid], scoped).value
        span = min(figures.LATENCY_SPAN_S, view.window_s)
        for pid in ("ttft", "itl"):
            recent = figures.latency(view.store, scoped.key(pid), span)
            cells[f"{pid}50"], cells[f"{pid}99"] = fmt.seconds(recent.p50), fmt.seconds(recent.p99)
        rows.append(cells)
    return rows


def fit(rows: list[dict[str, str]], width: int) -> list[tuple[str, str, int]]:
    """The columns (id, header, width) that fit in `width` cells: the engine; the model where
    there are several, as wide as the first `ESSENTIAL` figures leave (up to `MODEL_MAX`);
    then the figures in `KEEP`'s order while they fit."""
    engine_w = max([ENGINE_MIN, *(len(r["engine"]) for r in rows)])
    models = {r["model"] for r in rows}
    widths = {c.id: c.width for c in COLUMNS}
    room = width - engine_w - PADDING
    out = [("engine", "engine", engine_w)]
    if len(models) > 1:
        essential = sum(widths[cid] + PADDING for cid in KEEP[:ESSENTIAL])
        longest = max(len(m) for m in models)
        model_w = max(MODEL_MIN, min(MODEL_MAX, longest, room - essential - PADDING))
        out.insert(0, ("model", "model", model_w))
        room -= model_w + PADDING
    kept: set[str] = set()
    for cid in KEEP:
        if widths[cid] + PADDING <= room:
            kept.add(cid)
            room -= widths[cid] + PADDING
    return out + [(c.id, c.header, c.width) for c in COLUMNS if c.id in kept]


class EnginesScreen(ModalScreen[None]):
    """Per-engine breakdown."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,b", "dismiss", "Close")]

    def __init__(self, view: View) -> None:
        super().__init__()
        self._view = view
        self._columns: list[tuple[str, str, int]] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="engines", classes="dialog") as box:
            box.border_title = "Engines"
            yield DataTable(id="engine-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="engines-note", classes="dialog-hint")

    def on_mount(self) -> None:
        self.show(self._view)
        self.call_after_refresh(lambda: self.show(self._view))  # at the table's own width

    def on_resize(self) -> None:
        self.show(self._view)

    def show(self, view: View) -> None:
        self._view = view
        rows = engine_rows(view)
        table = self.query_one(DataTable)
        width = table.size.width or self.size.width
        columns = fit(rows, width)
        if columns != self._columns:
            self._columns = columns
            table.clear(columns=True)
            for cid, header, w in columns:
                label = Text(header, justify="left" if cid in ("model", "engine") else "right")
                table.add_column(label, width=w, key=cid)
        else:
            table.clear()
        for row in rows:
            # Text, not str: a str cell is read as Rich markup, and model and engine names are
            # the server's label values ("[@click=app.quit]" would be a link that quits).
            table.add_row(*(self._cell(row[cid], cid, w) for cid, _, w in columns))
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

    @staticmethod
    def _cell(text: str, cid: str, width: int) -> Text:
        if cid in ("model", "engine"):
            cut = text if len(text) <= width else text[: width - 1] + "…"
            return Text(cut)
        return Text(text, justify="right")
