"""Regenerates the fixed traces the golden-file tests read (run only when the format changes).

    python -m tests.golden.make_traces

The traces are committed: they are also the proof that a format-1 trace written today still
reads tomorrow. The reports rendered from them are compared with the `*.txt` / `*.md` beside
them (`UPDATE_GOLDEN=1 pytest tests/unit/test_report_golden.py` rewrites those).
"""

from __future__ import annotations

from pathlib import Path

from tests.tracegen import BusyEngine
from vtop.trace.recorder import Recorder

HERE = Path(__file__).parent


def record(name: str, seed: int, polls: int, pressure: tuple[int, int] | None = None) -> None:
    path = HERE / name
    path.unlink(missing_ok=True)
    engine = BusyEngine(seed, start=1_750_000_000.0)
    with Recorder(
        path, sources=["synthetic busy engine (tests/tracegen.py)"], interval_s=1.0
    ) as rec:
        for i in range(polls):
            engine.pressure = 1.6 if pressure and pressure[0] <= i < pressure[1] else 0.0
            engine.step()
            rec.feed(engine.frame())


if __name__ == "__main__":
    record("busy.vtrace", 11, 600)
    record("kv-pressure.vtrace", 12, 600, pressure=(200, 420))
