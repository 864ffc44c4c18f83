"""SVG snapshots of the replay screen and of training's question, at 80×24 and 120×40.

Over a shipped trace (traces/budget-too-small.vtrace), built as the CLI builds it, with the
findings pass made beforehand and nothing ticking (tests/ui/replaying.py), so every run draws
the same bytes. The replay screen stands where budget-too-small starts firing (the trace's
one mark, 0:14 in, so the charts hold 14 s of history), with ttft-queueing, the symptom it
explains, shown suppressed; the question is training's first and only one, at the same place.
The shipped trace rather than the training tests' two-incident one: these show what
`vtop --replay` (`--train`) shows of a trace users get, and a file in the repository changes
only when regenerated, while a trace recorded at test time changes with the simulator. A
change in layout or wording fails here until the snapshots are reviewed and updated
(`pytest tests/ui --snapshot-update`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.ui.replaying import build, pass_over

Compare = Callable[..., bool]
SIZES = [(80, 24), (120, 40)]


def ids(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


@pytest.mark.parametrize("size", SIZES, ids=ids)
def test_replay_screen(snap_compare: Compare, size: tuple[int, int]) -> None:
    ((t1, label),) = pass_over()[0].marks  # the cause fires first and carries its symptom
    assert label == "WARNING budget-too-small"

    async def there(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert hasattr(app, "seek_to")
        app.seek_to(t1)
        await pilot.pause()

    assert snap_compare(build(), terminal_size=size, run_before=there)


@pytest.mark.parametrize("size", SIZES, ids=ids)
def test_training_question(snap_compare: Compare, size: tuple[int, int]) -> None:
    async def ask(pilot: Pilot[None]) -> None:
        await pilot.press("n")
        await pilot.pause()

    assert snap_compare(build(train=True), terminal_size=size, run_before=ask)
