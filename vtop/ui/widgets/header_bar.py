"""The top line: which endpoint, model and version, uptime, connection, poll cost, vtop's cost.

One line of fields. Their places follow their text lengths, so they are recomputed (and the
line repainted) only when a length changes; the poll latency, which changes every poll, has a
fixed width and repaints its own dozen cells. On narrow terminals the brand, version and
uptime give way to what matters more.
"""

from __future__ import annotations

from textual.content import Content

from vtop.model import Severity
from vtop.ui.headline import Headline
from vtop.ui.widgets.fields import Field, FieldsWidget

ORDER = ("brand", "endpoint", "model", "version", "uptime", "status", "latency", "cadence",
         "cost")  # fmt: skip
FIXED = {"latency": 12}
MAX = {"endpoint": 36, "status": 46}
NARROW_HIDDEN = ("brand", "version", "uptime")
STYLES = {
    "brand": "bold $accent",
    "endpoint": "bold",
    "version": "$text-muted",
    "uptime": "$text-muted",
    "cadence": "$text-muted",
    "cost": "$text-muted",
}
LEVEL_STYLES = {Severity.WARNING: "bold $warning", Severity.CRITICAL: "bold reverse $error"}


class HeaderBar(FieldsWidget):
    """vtop's header."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="header")
        self._texts: dict[str, Content] = {"brand": Content.styled("vtop", STYLES["brand"])}
        self.levels: dict[str, Severity] = {}

    def show(self, head: Headline | None, *, cadence: str, cost: str) -> None:
        t = self._texts
        if head is not None:
            for name in ("endpoint", "model", "version", "uptime"):
                t[name] = Content.styled(getattr(head, name), STYLES.get(name, ""))
            self.levels["status"] = head.status_level
            self.levels["latency"] = head.latency_level
            t["status"] = Content.styled(head.status, LEVEL_STYLES.get(head.status_level, ""))
            t["latency"] = Content.styled(head.latency, LEVEL_STYLES.get(head.latency_level, ""))
        t["cadence"] = Content.styled(cadence, STYLES["cadence"])
        t["cost"] = Content.styled(cost, STYLES["cost"])
        self._place()
        for name, content in t.items():
            self.put(name, content)

    def on_resize(self) -> None:
        self._place()

    def _place(self) -> None:
        width = self.size.width
        if width <= 0:
            return
        names = [n for n in ORDER if n in self._texts]
        if width < 110:
            names = [n for n in names if n not in NARROW_HIDDEN]
        widths = {}
        for n in names:
            if n in FIXED:
                widths[n] = FIXED[n]
            else:
                widths[n] = min(self._texts[n].cell_length, MAX.get(n, 999))
        used = sum(widths.values()) + 2 * len(names)
        if "model" in widths:  # the model takes what is left (and gives way first)
            widths["model"] = max(4, min(self._texts["model"].cell_length, width - used
                                         + widths["model"]))  # fmt: skip
        layout: dict[str, Field] = {}
        x = 1
        for n in names:
            if x >= width:
                break
            w = min(widths[n], width - x)
            layout[n] = Field(0, x, w)
            x += w + 2
        self.place(layout)
