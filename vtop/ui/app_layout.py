"""The dashboard's size: the compact or the roomy layout, and repaints after terminal resizes.

Kept apart from drawing because it answers a different question (how much room there is, not
what goes in it) and runs on other occasions: a resize burst, once it settles; after each poll,
one ioctl in case the terminal's last resize went unseen. A mixin of `VtopApp`
(`vtop.ui.app_host` says how the parts fit).
"""

from __future__ import annotations

import asyncio
import os
import sys

from textual import events
from textual.geometry import Size

from vtop.ui import room
from vtop.ui.app_host import DashboardHost

RESIZE_SETTLE_S = 0.05
"""Quiet time after the last resize of a burst before the full repaint."""


class LayoutMixin(DashboardHost):
    """Which layout fits the terminal, and a full repaint once its size settles."""

    def on_resize(self, event: events.Resize) -> None:
        """Repaint the whole screen once a burst of terminal resizes has settled.

        Textual coalesces a burst of resizes and skips one that ends at the size it last
        drew, as if the terminal had kept the picture; but a terminal (tmux, xterm) drops what
        a smaller size cut off. Without this, 200×60 → 80×24 → 200×60 in one drag left the
        GPU panel and the footer blank until their text changed: the footer's never does."""
        if self._repaint is not None:
            self._repaint.cancel()
        self._repaint = asyncio.get_running_loop().call_later(RESIZE_SETTLE_S, self._repaint_all)
        self._choose_layout()

    def _repaint_all(self) -> None:
        self._repaint = None
        if self.is_running:
            self._choose_layout()
            self.refresh()
            self._follow_terminal_size()

    def _follow_terminal_size(self) -> None:
        """Catch up with a resize that got lost in a storm of them.

        On a loaded machine the last SIGWINCH of a burst can go unseen, and the app then
        draws for a size the terminal no longer has until the next resize. One ioctl after
        each burst and each poll finds that out; a `Resize` like the driver's puts it right.
        """
        if self.is_headless or sys.__stdout__ is None:
            return
        try:
            width, height = os.get_terminal_size(sys.__stdout__.fileno())
        except (OSError, ValueError):
            return
        if (width, height) != (self.size.width, self.size.height):
            size = Size(width, height)
            self.post_message(events.Resize(size, size))

    def _choose_layout(self) -> None:
        """Share the rows out (`vtop.ui.room`): compact (a row per panel) or roomy (boxed
        panels), and in compact what gives way where rows are short (the GPU's notes, its
        box, a row per panel, the verdict's lines), so the screen never scrolls.

        Counted from what the rest takes (the header, the footer, a replay's timeline, the
        endpoints' rows, the GPU lines), never from the verdict's lines now, so a longer
        diagnosis does not flip the layout. Runs after every poll: each change is applied only
        when it is one (a style set is a relayout).
        """
        screen = self.screen_stack[0] if self.screen_stack else None
        width, height = self.size
        if screen is None or width <= 0 or height <= 0:
            return
        mine = (self.endpoint_list, self.triage, self.grid, self.gpus)
        fixed = sum(
            w.outer_size.height
            for w in screen.children
            if w.display and w not in mine and not (w.styles.layer or "").startswith("_")
        )
        gpus, notes = self.gpus.needs
        fleet = self.endpoint_list.needs if self.endpoint_list.display else 0
        plan = room.plan(room.Needs(width, height, fixed, fleet, gpus, notes))
        self.gpus.set_form(plan.gpu)
        for widget, rows in ((self.triage, plan.triage), (self.endpoint_list, plan.fleet)):
            cap = widget.styles.max_height
            if rows and (cap is None or not cap.is_cells or int(cap.value) != rows):
                widget.styles.max_height = rows
        if screen.has_class("-compact") != plan.compact or self.grid.across != plan.across:
            screen.set_class(plan.compact, "-compact")
            self.grid.assign(plan.across)
