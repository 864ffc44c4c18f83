"""What every source of frames offers, so the TUI, report and recorder never ask which it is.

Live endpoints, the in-process simulator and a trace being replayed all implement this:
`poll()` returns the next `Frame`, `status()` says in one line how an endpoint's connection
stands (for the header), and `aclose()` releases what the source holds.

A source that can read the past (Prometheus) may also offer `async history() -> list[Frame]`:
called before the first poll, it returns the backfill as one frame per step, oldest first, for
consumers that want to step through it (a report's timeline); `poll()` alone returns the same
past in its first frame, so a consumer that ignores `history` still gets it.
"""

from __future__ import annotations

from typing import Protocol

from vtop.model import Frame


class FrameSource(Protocol):
    """A producer of frames, polled once per interval by its consumer."""

    async def poll(self) -> Frame:
        """The next frame. Never raises for a failing endpoint: that is in `Scrape.error`."""
        ...

    def status(self, endpoint: str) -> str:
        """'connected', 'connecting', 'reconnecting (attempt k, next in N s)', 'replay', …"""
        ...

    async def aclose(self) -> None: ...
