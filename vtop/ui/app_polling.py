"""The dashboard's polling: one one-shot timer, one poll at a time, each frame fed and drawn.

Polls never overlap and nothing ticks between them: the timer is re-armed only once a poll has
finished, for what is left of the interval (`Pacer` makes the first seconds after attaching
faster). A failing poll is one notice, and polling goes on. A mixin of `VtopApp`
(`vtop.ui.app_host` says how the parts fit).
"""

from __future__ import annotations

import asyncio
import time

from vtop.model import Frame
from vtop.sources.base import pace
from vtop.ui.app_host import DashboardHost


class PollingMixin(DashboardHost):
    """The poll loop: `_arm` a timer, `_poll` the source, `ingest` the frame."""

    @property
    def interval(self) -> float:
        """Seconds between polls once the first seconds' warm-up is over (`Pacer`)."""
        return self._pacer.interval_s

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._pacer.interval_s = seconds

    def _arm(self, delay: float) -> None:
        """One one-shot timer for the next poll; re-armed only when a poll has finished.

        A plain event-loop timer and task, not a Textual `Timer` or worker: creating one of
        those costs a tenth of a millisecond or more on every poll (a worker also posts three
        state messages), and a zero-delay `Timer` divides by zero.
        """
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._start_poll)

    def _start_poll(self) -> None:
        self._timer = None
        self._polling = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        started = time.monotonic()
        self._poll_started = started
        after = self.interval
        try:
            frame = await self.source.poll()
            self.ingest(frame)
            self._poll_failures = 0
            # Faster for the first seconds after attaching, where the server answers fast.
            after = self._pacer.next_after(frame)
            pace(self.source, after)
        except Exception as exc:  # a source or view bug must not kill the screen, nor polling
            self._poll_failures += 1
            if self._poll_failures == 1:
                self.notify(f"poll failed: {exc}", severity="error", timeout=10)
        self._follow_terminal_size()
        if self._autopoll and self.is_running:
            self._arm(after - (time.monotonic() - started))

    def ingest(self, frame: Frame) -> None:
        """Feed one frame to the monitor (and the recorder) and redraw (unless paused)."""
        self.monitor.feed(frame)
        if self.recorder is not None:
            self.recorder.feed(frame)
        if self.paused:
            self._show_header()
        else:
            self.refresh_view()
