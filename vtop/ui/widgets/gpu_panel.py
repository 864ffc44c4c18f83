"""The server's GPUs, a line each, or one line saying why none can be read.

It shows what `vtop.signals.gpus.shown` gives (the app passes `Monitor.gpus`), as `--once`
and `--report` do: the dcgm-exporter series a server's page carries (the server's GPUs, even
where this host has no driver) and NVML's reading of this host. When every endpoint is remote
and the cards are this host's, the panel says so instead of letting them pass for the
server's; GPUs read from a page say that too. Each reading is its own field,
and the ones that move every poll (utilisation, power) come first: a changed line is
rewritten from the panel's edge to the end of the change, so the card's name, which never
changes, goes last. A field that does not fit whole is left out (a narrow terminal shows
fewer readings, never a cut `v…`).

Where the screen is short of rows (`vtop.ui.room`) the notes go first, then the box: one
line without a border, the GPU's own readings or, with several, all of them together
(`4 GPUs  util 71–92%  power 1.4k/1.8k W  max 72°C  mem 88.4/96.0 GiB`).
"""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Size

from vtop import fmt
from vtop.model import GpuReading, GpuStatus, Severity
from vtop.signals.gpus import PAGE
from vtop.ui.room import GpuForm
from vtop.ui.thresholds import FALLBACK, Table, level
from vtop.ui.widgets.fields import Field, FieldsWidget

MAX_GPUS = 8
TEMP_STYLE = {
    Severity.OK: "",
    Severity.WARNING: "bold $warning",
    Severity.CRITICAL: "bold reverse $error",
}
COLUMNS = (
    ("head", 4),
    ("util", 9),
    ("power", 15),
    ("temp", 5),
    ("clock", 12),
    ("mem", 17),
    ("proc", 13),
    ("name", 40),
)


def gpu_fields(g: GpuReading, table: Table = FALLBACK) -> dict[str, Content]:
    """`GPU0 RTX 4090 | util 92% | mem 21.3/24.0 GiB | power 310/450 W | 72°C | SM … | vLLM …`."""
    head = Content.styled(f"GPU{g.index}", "bold")
    name = Content.styled(g.name, "$text-muted")
    if g.error:
        return {"head": head, "util": Content.styled(g.error, "$error"), "name": name}

    def whole(v: float | None, unit: str) -> str:
        """Whole units: a GPU's utilisation and temperature jitter in their decimals."""
        return f"{v:.0f}{unit}" if v is not None else fmt.DASH

    clock = f"{g.sm_clock_mhz:.0f} MHz" if g.sm_clock_mhz is not None else fmt.DASH
    temp_style = TEMP_STYLE[level("gpu_temp", g.temp_c, table)]
    out = {
        "head": head,
        "name": name,
        "util": Content.assemble(("util ", "$text-muted"), (whole(g.util_pct, "%"), "bold")),
        "mem": Content.assemble(
            ("mem ", "$text-muted"), f"{fmt.gib(g.mem_used_bytes)}/{fmt.gib(g.mem_total_bytes)} GiB"
        ),
        "power": Content.assemble(
            ("power ", "$text-muted"), f"{fmt.num(g.power_w)}/{fmt.num(g.power_limit_w)} W"
        ),
        "temp": Content.styled(whole(g.temp_c, "°C"), temp_style),
        "clock": Content.assemble(("SM ", "$text-muted"), clock),
    }
    if g.process_mem_bytes is not None:
        out["proc"] = Content.assemble(
            ("vLLM ", "$text-muted"), f"{fmt.gib(g.process_mem_bytes)} GiB"
        )
    return out


def gpus_fields(gpus: list[GpuReading], table: Table = FALLBACK) -> dict[str, Content]:
    """Several GPUs on one line: their count, the spread of their utilisation, the power and
    memory summed, the hottest one's temperature."""
    read = [g for g in gpus if not g.error]

    def known(values: list[float | None]) -> list[float]:
        return [v for v in values if v is not None]

    def total(values: list[float | None]) -> float | None:
        return sum(known(values)) if known(values) else None

    utils = known([g.util_pct for g in read])
    temps = known([g.temp_c for g in read])
    util = f"{min(utils):.0f}–{max(utils):.0f}%" if utils else fmt.DASH
    hottest = max(temps) if temps else None
    power = f"{fmt.num(total([g.power_w for g in read]))}/"
    mem_used = total([g.mem_used_bytes for g in read])
    mem = f"{fmt.gib(mem_used)}/{fmt.gib(total([g.mem_total_bytes for g in read]))} GiB"
    return {
        "head": Content.styled(f"{len(gpus)} GPUs", "bold"),
        "util": Content.assemble(("util ", "$text-muted"), (util, "bold")),
        "power": Content.assemble(
            ("power ", "$text-muted"), f"{power}{fmt.num(total([g.power_limit_w for g in read]))} W"
        ),
        "temp": Content.assemble(
            ("max ", "$text-muted"),
            Content.styled(
                f"{hottest:.0f}°C" if hottest is not None else fmt.DASH,
                TEMP_STYLE[level("gpu_temp", hottest, table)],
            ),
        ),
        "mem": Content.assemble(("mem ", "$text-muted"), mem),
    }


class GpuPanel(FieldsWidget, can_focus=True):
    """One line per GPU (up to `MAX_GPUS`)."""

    DEFAULT_CSS = """
    GpuPanel { height: auto; }
    """

    def __init__(self) -> None:
        super().__init__(id="gpus")
        self.border_title = "GPU"
        self._rows: list[dict[str, Content]] = []
        """The lines shown, in the current form."""
        self._lines: list[dict[str, Content]] = []
        """A line per GPU (or the one saying why none can be read)."""
        self._notes: list[dict[str, Content]] = []
        self._one: dict[str, Content] = {}
        """All of it in one line."""
        self._form: GpuForm = "box"

    @property
    def needs(self) -> tuple[int, int]:
        """GPU lines and note lines, in the box (`vtop.ui.room.Needs`)."""
        return max(1, len(self._lines)), len(self._notes)

    @property
    def form(self) -> GpuForm:
        return self._form

    def set_form(self, form: GpuForm) -> None:
        """The box with its notes, without them, or one line without the box."""
        if form != self._form:
            self._form = form
            self.set_class(form == "line", "-line")
            self._show_rows()

    @property
    def lines(self) -> list[str]:
        """The plain text of each line, as shown."""
        return [self.line(y).plain.rstrip() for y in range(len(self._rows))]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._rows))

    def show(self, status: GpuStatus, *, remote_only: bool, table: Table = FALLBACK) -> None:
        lines: list[dict[str, Content]] = []
        notes: list[dict[str, Content]] = []
        if status.unavailable or not status.gpus:
            why = status.unavailable or "NVML found no GPU"
            lines.append(
                {"head": Content.assemble(("no GPU readable: ", "bold"), (why, "$text-muted"))}
            )
        else:
            lines.extend(gpu_fields(g, table) for g in status.gpus[:MAX_GPUS])
            if any(g.source == PAGE for g in status.gpus):
                note = "read from the server's /metrics (dcgm-exporter series)"
                notes.append({"head": Content.styled(note, "$text-muted")})
            elif remote_only:
                note = "these are this host's GPUs; the server is remote"
                notes.append({"head": Content.styled(note, "$text-muted")})
        self._lines, self._notes = lines, notes
        several = len(status.gpus) > 1 and not status.unavailable
        self._one = gpus_fields(list(status.gpus), table) if several else lines[0]
        self._show_rows()

    def _show_rows(self) -> None:
        if self._form == "line":
            rows = [self._one]
        else:
            rows = self._lines + (self._notes if self._form == "box" else [])
        if len(rows) != len(self._rows) or any(
            set(a) != set(b) for a, b in zip(rows, self._rows, strict=False)
        ):
            self._rows = rows
            self.refresh(layout=True)
            self._place()
        self._rows = rows
        for y, row in enumerate(rows):
            for name, content in row.items():
                self.put(f"{y}.{name}", content)

    def on_resize(self) -> None:
        self._place()

    def _place(self) -> None:
        width = self.size.width
        layout: dict[str, Field] = {}
        for y, row in enumerate(self._rows):
            x = 0
            for name, w in COLUMNS:
                if name not in row or x >= width:
                    continue
                if name == "head" and set(row) == {"head"}:
                    layout[f"{y}.{name}"] = Field(y, x, width)  # a message: cut if it must
                    continue
                if name == "name" or self._form == "line":
                    w = row[name].cell_length  # one line: no column to line up with
                if x + w > width:
                    continue  # a field that does not fit whole is left out, not cut mid-word
                layout[f"{y}.{name}"] = Field(y, x, w)
                x += w + 2
        self.place(layout)
