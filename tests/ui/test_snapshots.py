"""SVG snapshots of the dashboard at 80×24, 100×30, 120×40 and 200×60, and its other states.

The main screens (80×24 compact, 100×30 the boxed panels where they just fit) show five
minutes of a fixed simulator scenario (fixed seed and epoch: the same frames at every run,
through the real parser), for one endpoint and for four (four scenarios, a server each: at
80×24 what gives way for their rows, `vtop.ui.room`); the finding's detail, the engines
table and the help at 80×24 too. The states the simulator does not produce (an outage, data
parallelism, a second endpoint) come from scripted vLLM-shaped pages. What a snapshot alone
would not say (nothing cut mid-word, the GPU in view) is asserted in tests/ui/test_fit.py. Time on screen comes from the frames, vtop's
own CPU is fixed and no timer runs (`autopoll=False`). The findings on the simulator screens
are the triage engine's own, as the monitor computes them. A change in layout or wording
fails here until the snapshots are reviewed and updated (`pytest tests/ui --snapshot-update`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.ui import pages
from tests.ui.scripted import EP, FOUR, build_app, build_attach_app, build_sim_app
from vtop.sources.status import ConnectionStatus

Compare = Callable[..., bool]


@pytest.mark.parametrize(
    "size", [(80, 24), (100, 30), (120, 40), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_main_screen(snap_compare: Compare, size: tuple[int, int]) -> None:
    assert snap_compare(build_sim_app("memory-ceiling", findings=None), terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_four_endpoints(snap_compare: Compare, size: tuple[int, int]) -> None:
    assert snap_compare(build_sim_app(FOUR, findings=None), terminal_size=size)


def test_light_theme(snap_compare: Compare) -> None:
    app = build_sim_app("budget-too-small", findings=None, theme="light")
    assert snap_compare(app, terminal_size=(120, 40))


def test_reconnecting_compact(snap_compare: Compare) -> None:
    ep = pages.Endpoint(EP, down=set(range(400, 440)))
    down = ConnectionStatus("reconnecting", attempt=4, retry_in_s=8.0)
    app, _ = build_app(history=440, endpoints=[ep], status=lambda e: down)
    assert snap_compare(app, terminal_size=(80, 24))


async def predicted(pilot: Pilot[None]) -> None:
    """Enter on the lead finding, and its predicted effect in: the twin runs on a worker, and
    the snapshot waits for its answer, or it would catch "running the twin…" by chance."""
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_finding_detail(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = build_sim_app("memory-ceiling", findings=None)
    assert snap_compare(app, run_before=predicted, terminal_size=size)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_engines(snap_compare: Compare, size: tuple[int, int]) -> None:
    """`b` over an endpoint of two data-parallel engines."""
    app, _ = build_app(endpoints=[pages.Endpoint(EP, maker=pages.PageMaker(engines=2))])
    assert snap_compare(app, press=["b"], terminal_size=size)


def test_help(snap_compare: Compare) -> None:
    app, _ = build_app()
    assert snap_compare(app, press=["question_mark"], terminal_size=(80, 24))


def test_several_endpoints(snap_compare: Compare) -> None:
    a = pages.Endpoint(EP)
    b = pages.Endpoint("http://10.0.0.7:8000", maker=pages.PageMaker(pressure=0.3))
    app, _ = build_app(endpoints=[a, b])

    async def second(pilot: Pilot[None]) -> None:
        await pilot.press("2")

    assert snap_compare(app, terminal_size=(120, 40), run_before=second)


def test_likely_cause_compact(snap_compare: Compare) -> None:
    """Five seconds after attaching to a server in trouble: the likely cause leads, no advice."""
    app, source = build_attach_app(("budget-too-small",), 60)

    async def attach(pilot: Pilot[None]) -> None:
        for _ in range(20):
            app.ingest(await source.poll())
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=attach)
