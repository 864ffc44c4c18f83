"""The GPUs of this host, a line each, or one line saying why none can be read.

NVML sees the GPUs of the machine vtop runs on. When every endpoint is remote the panel says
so instead of letting the local cards pass for the server's. One `TextCell` per GPU, so a
changing power reading repaints one line.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content

from vtop.model import GpuReading, GpuStatus, Severity
from vtop.ui import fmt
from vtop.ui.thresholds import level
from vtop.ui.widgets.text_cell import TextCell

MAX_GPUS = 8


def gpu_line(g: GpuReading) -> tuple[Content, Severity]:
    """`GPU0 RTX 4090  util 92%  mem 21.3/24.0 GiB  power 310/450 W  72°C  SM 2.52k MHz`."""
    if g.error:
        return Content.assemble((f"GPU{g.index} ", "bold"), (g.error, "$error")), Severity.WARNING

    def val(v: float | None, unit: str) -> str:
        return f"{fmt.num(v)}{unit}" if v is not None else fmt.DASH

    mem = f"{fmt.gib(g.mem_used_bytes)}/{fmt.gib(g.mem_total_bytes)} GiB"
    power = f"{fmt.num(g.power_w)}/{fmt.num(g.power_limit_w)} W"
    temp_level = level("gpu_temp", g.temp_c)
    parts: list[str | tuple[str, str]] = [
        (f"GPU{g.index} ", "bold"),
        (f"{g.name[:24]}  ", "$text-muted"),
        ("util ", "$text-muted"), (val(g.util_pct, "%"), "bold"),
        ("  mem ", "$text-muted"), mem,
        ("  power ", "$text-muted"), power,
        ("  ", ""),
        (val(g.temp_c, "°C"), {Severity.OK: "", Severity.WARNING: "bold $warning"}.get(
            temp_level, "bold reverse $error")),
        ("  SM ", "$text-muted"), val(g.sm_clock_mhz, " MHz"),
    ]  # fmt: skip
    if g.process_mem_bytes is not None:
        parts += [("  vLLM ", "$text-muted"), f"{fmt.gib(g.process_mem_bytes)} GiB"]
    return Content.assemble(*parts), temp_level


class GpuPanel(Vertical):
    """One line per GPU (up to `MAX_GPUS`)."""

    def __init__(self) -> None:
        super().__init__(id="gpus")
        self.border_title = "GPU"
        self.rows = [TextCell("", classes="gpu-row") for _ in range(MAX_GPUS)]

    def compose(self) -> ComposeResult:
        yield from self.rows

    def show(self, status: GpuStatus, *, remote_only: bool) -> None:
        lines: list[Content] = []
        if status.unavailable or not status.gpus:
            why = status.unavailable or "NVML found no GPU"
            lines.append(Content.assemble(("no GPU readable: ", "bold"), (why, "$text-muted")))
        else:
            lines.extend(gpu_line(g)[0] for g in status.gpus[:MAX_GPUS])
            if remote_only:
                lines.append(Content.styled("these are this host's GPUs; the server is remote",
                                            "$text-muted"))  # fmt: skip
        lines = lines[:MAX_GPUS]
        for i, row in enumerate(self.rows):
            if i < len(lines):
                row.show(lines[i])
                row.display = True
            else:
                row.display = False
