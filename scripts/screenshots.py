"""Regenerate screenshots/ (the SVGs README shows) from the built-in simulator.

    .venv/bin/python scripts/screenshots.py

Every screenshot is five simulated minutes of a scenario with a fixed seed and epoch, drawn by
the real app through the real parser, at a fixed terminal size, so rerunning this script
gives the same files unless the screen changed. Time on screen comes from the frames and
vtop's own CPU is shown as a fixed figure (a screenshot should not vary with the machine).

Findings: when the monitor carries the triage engine's findings (`EndpointView.findings`),
the screenshots show those. Before the engine is merged they show the example findings the UI
tests use, and this script says so.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ui.scripted import (  # noqa: E402
    FINDINGS,
    FOUR,
    ScriptedSource,
    for_endpoint,
    merged,
    provider,
    sim_frames,
)
from vtop.monitor import EndpointView, Monitor  # noqa: E402
from vtop.sources.status import SIMULATED  # noqa: E402
from vtop.ui.app import VtopApp  # noqa: E402

OUT = ROOT / "screenshots"
HISTORY = 300


@dataclass(frozen=True)
class Shot:
    name: str
    scenarios: tuple[str, ...]
    size: tuple[int, int]
    theme: str = "dark"
    keys: tuple[str, ...] = ()


SHOTS = (
    Shot("dashboard-120x40", ("memory-ceiling",), (120, 40)),
    Shot("compact-80x24", ("budget-too-small",), (80, 24)),
    Shot("wide-200x60", ("past-sweet-spot",), (200, 60)),
    Shot("finding-detail-120x40", ("memory-ceiling",), (120, 40), keys=("enter",)),
    Shot("light-120x40", ("ttft-queueing",), (120, 40), theme="light"),
    Shot("endpoints-120x40", ("memory-ceiling", "healthy", "budget-too-small"), (120, 40)),
    Shot("endpoints-80x24", FOUR, (80, 24)),
    Shot("finding-detail-80x24", ("memory-ceiling",), (80, 24), keys=("enter",)),
    Shot("help-80x24", ("memory-ceiling",), (80, 24), keys=("question_mark",)),
)

TRIAGE_IN_MONITOR = "findings" in {f.name for f in fields(EndpointView)}


def build(shot: Shot) -> VtopApp:
    per = [sim_frames(name, HISTORY + 1) for name in shot.scenarios]
    frames = merged(per) if len(per) > 1 else list(per[0])
    monitor = Monitor(capacity=3600)
    for frame in frames[:HISTORY]:
        monitor.feed(frame)
    findings = None
    if not TRIAGE_IN_MONITOR:
        endpoint = frames[0].scrapes[0].endpoint
        findings = provider(for_endpoint(FINDINGS, endpoint))
    source = ScriptedSource(frames[HISTORY:], lambda e: SIMULATED)
    return VtopApp(source, monitor, interval=1.0, theme=shot.theme, findings=findings,
                   self_cpu=lambda: 0.4, autopoll=False)  # fmt: skip


async def take(shot: Shot) -> Path:
    app = build(shot)
    async with app.run_test(size=shot.size) as pilot:
        await pilot.pause()
        if shot.keys:
            await pilot.press(*shot.keys)
            await app.workers.wait_for_complete()  # the finding's predicted effect
            await pilot.pause()
        path = OUT / f"{shot.name}.svg"
        app.save_screenshot(path.name, str(OUT))
    return path


def main() -> int:
    OUT.mkdir(exist_ok=True)
    if not TRIAGE_IN_MONITOR:
        print("screenshots: the triage engine is not in this build; showing example findings")
    for shot in SHOTS:
        path = asyncio.run(take(shot))
        what = ", ".join((*shot.scenarios, *([shot.theme] if shot.theme != "dark" else [])))
        print(f"screenshots: {path.relative_to(ROOT)}  ({shot.size[0]}×{shot.size[1]}, {what})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
