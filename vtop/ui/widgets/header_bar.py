"""The top line: endpoint, model, version, uptime | poll latency, connection, cadence, cost.

Two `FieldRow`s side by side: the left one changes when the endpoint does, the right one
with the poll latency, and it starts with the latency so that a new one rewrites a dozen cells,
not the line. The latency shown is held while new ones stay near it (`LATENCY_BAND`) at the
same level, for at most `LATENCY_HOLD_S`: a poll's latency jitters by tens of percent from poll
to poll, and each new number is a repaint (of the header, and of the screen's top rows with it).
On narrow terminals the brand, version and uptime give way.

The endpoint is the last thing to be cut: the right-hand fields give way first, vtop's own
cost, then the poll latency, then the cadence, then the end of the connection's text. During
an outage that text is long (`↻ reconnecting (attempt 3, next in 4 s)`) and at 80 columns it
used to leave the endpoint `127.0.0.`, on the one screen where which server is down matters
most. An outage has no latency to show, so its column is not kept either.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content

from vtop.model import Severity
from vtop.ui.headline import Headline
from vtop.ui.widgets.field_row import GAP, FieldRow

NARROW = 110
STYLES = {
    "brand": "bold $accent",
    "endpoint": "bold",
    "version": "$text-muted",
    "uptime": "$text-muted",
    "cadence": "$text-muted",
    "cost": "$text-muted",
}
LATENCY_BAND = 1.5
"""A new latency replaces the one shown when it is more than this factor above or below it."""
LATENCY_HOLD_S = 10.0
"""...or when the one shown is this old (frame time)."""
LEVEL_STYLES = {Severity.WARNING: "bold $warning", Severity.CRITICAL: "bold reverse $error"}
ENDPOINT_W = 36
"""The endpoint's widest: past it, the model and the rest get the room."""
LATENCY_W = 10
RIGHT = ("latency", "status", "cadence", "cost")
"""The right-hand fields, left to right (the moving one first)."""
GIVE_WAY = ("cost", "latency", "cadence")
"""Which right-hand fields go first where the endpoint would be cut; then the status is cut."""


class HeaderBar(Horizontal):
    """vtop's header."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; }
    HeaderBar #header-info { width: 1fr; padding: 0 1; }
    HeaderBar #header-poll { width: auto; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="header")
        self.info = FieldRow(widest={"endpoint": ENDPOINT_W}, fill="model", id="header-info")
        self.poll = FieldRow(fixed={"latency": LATENCY_W}, widest={"status": 46}, id="header-poll")
        self.levels: dict[str, Severity] = {}
        self._head: Headline | None = None
        self._right: dict[str, Content] = {}
        self._left: tuple[tuple[str, str], ...] = ()
        self._latency: Headline | None = None
        self._shown: tuple[Headline | None, str, str] | None = None

    def compose(self) -> ComposeResult:
        yield self.info
        yield self.poll

    def text(self, name: str) -> str:
        """The plain text of a header field as shown ("" where it is left out)."""
        for row in (self.info, self.poll):
            if row.shown(name):
                return row.text(name)
        return ""

    def show(self, head: Headline | None, *, cadence: str, cost: str) -> None:
        if head is not None:
            head = self._held_latency(head)
        shown = (head, cadence, cost)
        if shown == self._shown:  # most polls: nothing on the header changed
            return
        self._shown = shown
        if head is not None:
            self._head = head
            self.levels["status"] = head.status_level
            self.levels["latency"] = head.latency_level
            self._right["latency"] = Content.styled(
                head.latency, LEVEL_STYLES.get(head.latency_level, "")
            )
            self._right["status"] = Content.styled(
                head.status, LEVEL_STYLES.get(head.status_level, "")
            )
        self._right["cadence"] = Content.styled(cadence, STYLES["cadence"])
        self._right["cost"] = Content.styled(cost, STYLES["cost"])
        self._show_info()
        self._show_right()

    def _show_right(self) -> None:
        """The right-hand fields that leave the endpoint whole (`GIVE_WAY`)."""
        shown = {n: self._right[n] for n in RIGHT if n in self._right and self._right[n].plain}
        width = self.size.width
        if width > 0:
            room = width - 4 - self._left_needs()  # both rows' padding: a column each side

            def natural() -> int:
                widths = [LATENCY_W if n == "latency" else shown[n].cell_length for n in shown]
                return sum(widths) + GAP * max(0, len(widths) - 1)

            for name in GIVE_WAY:
                if natural() > room:
                    shown.pop(name, None)
            status = shown.get("status")
            over = natural() - room
            if status is not None and over > 0:
                shown["status"] = status.truncate(max(3, status.cell_length - over), ellipsis=True)
        self.poll.show(shown)

    def _left_needs(self) -> int:
        """Columns the left row needs to show the endpoint whole (and the brand where shown)."""
        head = self._head
        need = min(ENDPOINT_W, len(head.endpoint)) if head is not None else 0
        return need if self.size.width < NARROW else need + len("vtop") + GAP

    def _held_latency(self, head: Headline) -> Headline:
        """`head`, with the latency shown before while the new one is close to it."""
        held = self._latency
        new, t = head.latency_s, head.t
        if (
            held is not None
            and held.latency_s is not None
            and held.t is not None
            and new is not None
            and t is not None
            and held.latency_level == head.latency_level
            and held.latency_s / LATENCY_BAND <= new <= held.latency_s * LATENCY_BAND
            and 0 <= t - held.t < LATENCY_HOLD_S
        ):
            return replace(head, latency=held.latency)
        self._latency = head
        return head

    def on_resize(self) -> None:
        self._show_info()
        self._show_right()

    def _show_info(self) -> None:
        narrow = self.size.width < NARROW
        texts: list[tuple[str, str]] = [] if narrow else [("brand", "vtop")]
        head = self._head
        if head is not None:
            names = ("endpoint", "model") if narrow else ("endpoint", "model", "version", "uptime")
            texts += [(name, getattr(head, name)) for name in names]
        shown = tuple(texts)
        if shown != self._left:  # it changes with the endpoint and the uptime's minute only
            self._left = shown
            self.info.show(
                {name: Content.styled(text, STYLES.get(name, "")) for name, text in texts}
            )
