"""A simulated server read as vtop reads a real one, for the what-if's tests and benches.

The twin is polled through `SimSource` (its real /metrics page, vtop's parser, the GPU it
reports) every `interval_s` virtual seconds, and the frames go through the same loop a trace's
do (`vtop.whatif.watched.from_frames`): what comes out is the `Watched` a recording of that
server would give, store, knobs and GPU.
"""

from __future__ import annotations

from vtop.sim.twin import Twin
from vtop.sources.sim import SimSource
from vtop.whatif.watched import Watched, from_frames


def polled(twin: Twin, window_s: float, interval_s: float = 5.0) -> Watched:
    """`window_s` virtual seconds of `twin`, a poll every `interval_s` (and one at the start)."""
    source = SimSource([twin], interval_s=interval_s, in_thread=False)
    frames = (source.poll_now() for _ in range(round(window_s / interval_s) + 1))
    watched = from_frames(frames)
    assert watched is not None, "a simulated server answers every poll"
    return watched
