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

from vtop.ui.app_host import DashboardHost

RESIZE_SETTLE_S = 0.05
"""Quiet time after the last resize of a burst before the full repaint."""
ROOMY_MIN_W = 100
"""The narrowest screen for the grid of boxed panels (three columns of 32)."""
ROOMY_ROWS = 15
"""Rows the grid of boxed panels needs: three rows of boxes with a value, a chart and a note
(and the statistics from 18)."""
TALL_H = 34
"""From this height the boxed panels are used at any content (`VERTICAL_BREAKPOINTS`)."""


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
        """Compact (a row per panel) or roomy (boxed panels): roomy where the screen is wide
        enough and the boxes fit under the rest, with the verdict at its short height.

        The size classes alone put 100×30 in the compact layout, whose nine rows left eight
        empty ones under the GPU; the boxes fit there, with their statistics. Counted from
        what the rest takes (GPU lines, endpoints, a replay's timeline) and the verdict's
        cap, not its lines now, so a longer diagnosis does not flip the layout.
        """
        screen = self.screen_stack[0] if self.screen_stack else None
        width, height = self.size
        if screen is None or width <= 0 or height <= 0:
            return
        compact = width < ROOMY_MIN_W
        if not compact and height < TALL_H:
            cap = self.triage.styles.max_height
            triage = int(cap.value) if cap is not None and cap.is_cells else 10
            rest = sum(
                w.outer_size.height
                for w in screen.children
                if w.display
                and w not in (self.triage, self.grid)
                and not (w.styles.layer or "").startswith("_")
            )
            compact = height - rest - triage < ROOMY_ROWS
        if screen.has_class("-compact") != compact:
            screen.set_class(compact, "-compact")
            self.grid.assign()
