"""The recorder: what a monitor loop (headless, report, TUI) calls with every frame it gets.

It owns one `TraceWriter` and keeps the loop free of file concerns: the header is written from
the first frame (by then the server has said its version, model and configuration), a write
error stops the recording with one message while the caller keeps monitoring, and `close()` is
safe to call from a signal handler at any moment. CPython runs handlers between bytecodes of
the main thread, possibly inside `feed()`; a close that arrives mid-write is therefore only
noted, and `feed()` completes the record and then closes, so the footer never lands inside a
record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from vtop import __version__
from vtop.model import Frame
from vtop.trace.writer import TraceWriteError, TraceWriter

Notify = Callable[[str], None]


def header_for(frame: Frame, sources: Sequence[str], interval_s: float | None) -> dict[str, Any]:
    """The header record: who wrote the trace, from what, and what the servers said."""
    endpoints = []
    for s in frame.scrapes:
        server = s.server
        endpoints.append(
            {
                "url": s.endpoint,
                "vllm_version": server.version if server else None,
                "models": list(server.models) if server else [],
                "max_model_len": server.max_model_len if server else None,
                "knobs": {n: [k.value, k.provenance, k.detail] for n, k in (s.knobs or {}).items()},
            }
        )
    return {
        "vtop": __version__,
        "created": datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="seconds"),
        "start_t": frame.t,
        "sources": list(sources),
        "interval_s": interval_s,
        "endpoints": endpoints,
        "gpus": [g.name for g in frame.gpu.gpus],
    }


class Recorder:
    """Records frames to `path` (created now, mode 0600, never overwritten).

    Raises `TraceWriteError` at construction if the file cannot be created; after that, errors
    only stop the recording: `error` holds the message, `notify` was called with it once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sources: Sequence[str] = (),
        interval_s: float | None = None,
        notify: Notify | None = None,
        keyframe_every: int | None = None,
    ) -> None:
        kw = {} if keyframe_every is None else {"keyframe_every": keyframe_every}
        self._writer = TraceWriter(path, **kw)
        self.path = self._writer.path
        self.sources = list(sources)
        self.interval_s = interval_s
        self.notify = notify
        self.error: str | None = None
        self._busy = False
        self._close_pending = False

    @property
    def active(self) -> bool:
        """True while frames are still being written."""
        return not self._writer.closed

    @property
    def polls(self) -> int:
        return self._writer.totals.polls

    @property
    def bytes(self) -> int:
        return self._writer.offset

    def feed(self, frame: Frame) -> None:
        """Write one frame (a no-op once the recording has stopped)."""
        if self._writer.closed:
            return
        self._busy = True
        try:
            if not self._writer.has_header:
                self._writer.write_header(header_for(frame, self.sources, self.interval_s))
            self._writer.write(frame)
        except TraceWriteError as exc:
            self._writer.abandon()
            self.error = (
                f"recording stopped after {self.polls} polls: {exc} "
                "(the trace holds every poll before)"
            )
            if self.notify is not None:
                self.notify(self.error)
        finally:
            self._busy = False
        if self._close_pending:
            self.close()

    def close(self) -> None:
        """Finish the file (index footer). Safe from signal handlers; idempotent."""
        if self._busy:
            self._close_pending = True
            return
        self._writer.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
