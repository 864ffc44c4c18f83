"""The top line: endpoint, model, version, uptime | poll latency, connection, cadence, cost.

Two `FieldRow`s side by side: the left one changes when the endpoint does, the right one
with the poll latency, and it starts with the latency so that a new one rewrites a dozen cells,
not the line. The latency shown is held while new ones stay near it (`LATENCY_BAND`) at the
same level, for at most `LATENCY_HOLD_S`: a poll's latency jitters by tens of percent from poll
to poll, and each new number is a repaint (of the header, and of the screen's top rows with it).
On narrow terminals the brand, version and uptime give way.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content

from vtop.model import Severity
from vtop.ui.headline import Headline
from vtop.ui.widgets.field_row import FieldRow

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


class HeaderBar(Horizontal):
    """vtop's header."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; }
    HeaderBar #header-info { width: 1fr; padding: 0 1; }
    HeaderBar #header-poll { width: auto; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="header")
        self.info = FieldRow(widest={"endpoint": 36}, fill="model", id="header-info")
        self.poll = FieldRow(fixed={"latency": 10}, widest={"status": 46}, id="header-poll")
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
        """The plain text of a header field."""
        return self.info.text(name) or self.poll.text(name)

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
        order = ("latency", "status", "cadence", "cost")  # the moving field first
        self.poll.show({name: self._right[name] for name in order if name in self._right})

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
            self.info.show({name: Content.styled(text, STYLES.get(name, ""))
                            for name, text in texts})  # fmt: skip
