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

The model has a width of its own, decided by the terminal's width, the endpoint's and the
connection's state only (`model_width`), so it keeps its place while the latency, the cost
or the replay's clock change beside it: it took what the right-hand fields left, and grew and
shrank a letter at a time with them. Where it does not fit whole it is shortened at its dashes
(`Qwen2.5-7B-Instruct` -> `Qwen2.5-7B`, `headline.model_forms`), never to `Qwe…` while a
right-hand field it outranks was shown.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content

from vtop.model import Severity
from vtop.ui.headline import Headline, model_forms
from vtop.ui.room import fitting
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
CADENCE_W = 7
"""What the right-hand side keeps for the cadence at its usual (`1s · 5m`)."""
OUTAGE_W = 42
"""What the right-hand side keeps for the connection during an outage (`↻ reconnecting
(attempt 12, next in 30 s)`), whose numbers change every second."""
MODEL_MIN = 4
"""The fewest columns the model is shown in; with fewer it is left out."""


class HeaderBar(Horizontal):
    """vtop's header."""

    DEFAULT_CSS = """
    HeaderBar { height: 1; }
    HeaderBar #header-info { width: 1fr; padding: 0 1; }
    HeaderBar #header-poll { width: auto; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__(id="header")
        self.info = FieldRow(widest={"endpoint": ENDPOINT_W}, id="header-info")
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
        """Columns the left row needs to show the endpoint whole and the model as shown (and
        the brand where shown)."""
        head = self._head
        need = min(ENDPOINT_W, len(head.endpoint)) if head is not None else 0
        model = self._model()
        if model:
            need += GAP + len(model)
        return need if self.size.width < NARROW else need + len("vtop") + GAP

    def model_width(self) -> int:
        """The model's most columns: what the header's width leaves after the endpoint, the
        brand and what the right-hand side keeps for the poll latency, the connection and the
        cadence (the connection alone, during an outage)."""
        head = self._head
        if head is None:
            return 0
        keep = (
            OUTAGE_W
            if head.status_level is Severity.CRITICAL
            else LATENCY_W + GAP + len(head.status) + GAP + CADENCE_W
        )
        brand = len("vtop") + GAP if self.size.width >= NARROW else 0
        endpoint = min(ENDPOINT_W, len(head.endpoint))
        return self.size.width - 4 - brand - endpoint - GAP - GAP - keep

    def _model(self) -> str:
        """The model as shown: whole where it fits, else shortened at its dashes, else cut."""
        head = self._head
        room = self.model_width()
        if head is None or room < MODEL_MIN:
            return ""
        forms = model_forms(head.model)
        shown = fitting(forms, room)
        return shown if len(shown) <= room else shown[: room - 1] + "…"

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
            texts.append(("endpoint", head.endpoint))
            model = self._model()
            if model:
                texts.append(("model", model))
            if not narrow:
                texts += [("version", head.version), ("uptime", head.uptime)]
        shown = tuple(texts)
        if shown != self._left:  # it changes with the endpoint and the uptime's minute only
            self._left = shown
            self.info.show(
                {name: Content.styled(text, STYLES.get(name, "")) for name, text in texts}
            )
