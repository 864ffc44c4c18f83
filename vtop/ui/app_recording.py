"""The dashboard's recorder: `r` starts a trace of every frame polled from here on, or stops it.

A recording is a file that must stay valid whatever ends it, so stopping is one method that
every way out calls (the key, `q`, SIGTERM, a hangup); host readings are asked of the source
only while a recording wants them. A mixin of `VtopApp` (`vtop.ui.app_host` says how the
parts fit).
"""

from __future__ import annotations

import time

from vtop.sources.base import sample_host
from vtop.trace.recorder import Recorder
from vtop.trace.writer import TraceWriteError
from vtop.ui.app_host import DashboardHost


class RecordingMixin(DashboardHost):
    """`r`, and the one way a recording stops."""

    def action_record(self) -> None:
        """Start recording every frame to a new trace here, or stop (the file stays valid)."""
        if self.recorder is not None and self.recorder.active:
            self._stop_recording()
        else:
            path = self.record_dir / time.strftime("vtop-%Y%m%d-%H%M%S.vtrace")
            try:
                self.recorder = Recorder(
                    path,
                    sources=list(self.monitor.endpoints),
                    interval_s=self.interval,
                    notify=lambda message: self.notify(message, severity="error", timeout=10),
                )
            except TraceWriteError as exc:
                self.notify(f"cannot record: {exc}", severity="error", timeout=8)
                return
            sample_host(self.source, True)
            self.notify(f"recording to {path} (r stops)", title="recording", timeout=5)
        self._show_header()

    def _stop_recording(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return
        sample_host(self.source, False)
        recorder.close()
        if recorder.error is None:
            self.notify(
                f"{recorder.path}: {recorder.polls} polls, {recorder.bytes // 1024} KiB",
                title="recording stopped",
                timeout=6,
            )
