"""Regenerate the replay screen's screenshots (screenshots/replay-*.svg) from shipped traces.

    .venv/bin/python scripts/replay_screenshots.py

Each is a shipped trace in `traces/` opened as `vtop --replay` opens it (the findings pass made
beforehand, nothing ticking, vtop's own CPU fixed), moved to a place worth showing, at a fixed
terminal size: rerunning gives the same files unless the screen changed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ui.replaying import build, pass_over  # noqa: E402
from vtop.ui.replay_app import ReplayApp  # noqa: E402

OUT = ROOT / "screenshots"
Move = Callable[[ReplayApp, Any], Awaitable[None]]


async def at_last_mark(app: ReplayApp, pilot: Any) -> None:
    app.seek_to(pass_over(Path(app.replay.reader.path))[0].marks[-1][0])


async def first_question(app: ReplayApp, pilot: Any) -> None:
    await pilot.press("n")


async def revealed(app: ReplayApp, pilot: Any) -> None:
    await pilot.press("n", "enter")  # the first diagnosis offered, then the first change
    await pilot.pause()
    await pilot.press("enter")


@dataclass(frozen=True)
class Shot:
    name: str
    trace: str
    size: tuple[int, int]
    move: Move
    train: bool = False


SHOTS = (
    Shot("replay-120x40", "memory-ceiling", (120, 40), at_last_mark),
    Shot("replay-80x24", "budget-too-small", (80, 24), at_last_mark),
    Shot("train-question-120x40", "budget-too-small", (120, 40), first_question, train=True),
    Shot("train-answer-120x40", "budget-too-small", (120, 40), revealed, train=True),
)


async def take(shot: Shot) -> Path:
    app = build(ROOT / "traces" / f"{shot.trace}.vtrace", train=shot.train)
    async with app.run_test(size=shot.size) as pilot:
        await pilot.pause()
        await shot.move(app, pilot)
        await pilot.pause()
        path = OUT / f"{shot.name}.svg"
        app.save_screenshot(path.name, str(OUT))
    return path


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for shot in SHOTS:
        path = asyncio.run(take(shot))
        mode = "training" if shot.train else "replay"
        print(f"screenshots: {path.relative_to(ROOT)}  ({shot.size[0]}×{shot.size[1]}, "
              f"{mode} of traces/{shot.trace}.vtrace)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
