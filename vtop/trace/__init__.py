"""vtop's recording format: polls written as they happen, read back to recompute everything.

A trace holds what the sources saw (every endpoint's canonical series with histogram buckets,
the GPUs, the host, events, the configuration when it changed), never what vtop concluded:
findings are recomputed on replay, so better rules apply to old incidents. The layout is
described in docs/trace-format.md; `wire` frames bytes, `codec` turns polls into bodies and
`decoder` bodies back into polls (`lanes`, `plan`), `metadata` checks what a body says besides
numbers, `writer`/`reader` own files (`index` checks the footer's), `recorder` is what the
monitor loops call.
"""

from vtop.trace.index import Keyframe, TraceStats
from vtop.trace.reader import Header, TraceError, TraceReader
from vtop.trace.wire import FORMAT_VERSION
from vtop.trace.writer import TraceWriteError, TraceWriter

__all__ = [
    "FORMAT_VERSION",
    "Header",
    "Keyframe",
    "TraceError",
    "TraceReader",
    "TraceStats",
    "TraceWriteError",
    "TraceWriter",
]
