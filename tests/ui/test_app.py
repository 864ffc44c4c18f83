"""The dashboard driven by Pilot: every key and every state a user meets.

The app is built as the CLI builds it (a `FrameSource` and a `Monitor`), over frames made by
the real parser from vLLM-shaped pages; only the frames and the connection status are
scripted.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.command import CommandPalette

from tests.ui import pages
from tests.ui.screen_text import colour_codes, screen_lines, screen_text, terminal_bytes
from tests.ui.scripted import (
    EP,
    FINDINGS,
    FIRING,
    PENDING,
    UNDERLOADED,
    ScriptedSource,
    build_app,
    build_attach_app,
    build_sim_app,
)
from vtop.model import ACCRUING, Frame, Severity
from vtop.monitor import Monitor
from vtop.sources.status import CONNECTED, ConnectionStatus
from vtop.ui.app import VtopApp
from vtop.ui.screens.engines import EnginesScreen
from vtop.ui.screens.explain import ExplainScreen
from vtop.ui.screens.finding import FindingScreen
from vtop.ui.screens.help import HelpScreen
from vtop.ui.views import fleet
from vtop.ui.views.headline import Headline
from vtop.ui.views.panels import Trend
from vtop.ui.widgets.fields import FieldsWidget
from vtop.ui.widgets.header_bar import HeaderBar

SIZE = (120, 40)


def cell(app: VtopApp, name: str) -> str:
    return app.header.text(name)


class Panel:
    """One panel of the scheduler grid, as tests read it."""

    def __init__(self, app: VtopApp, pid: str) -> None:
        self.grid, self.pid = app.grid, pid

    def text(self, part: str) -> str:
        return self.grid.text(f"{self.pid}.{part}")

    @property
    def trend(self) -> Trend | None:
        return self.grid.trend(self.pid)


def panel(app: VtopApp, pid: str) -> Panel:
    return Panel(app, pid)


async def test_connected_shows_header_panels_triage_and_gpu() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert cell(app, "endpoint") == "localhost:8000"
        assert cell(app, "model") == "Qwen2.5-7B-Instruct"
        assert cell(app, "version") == "vLLM 0.32.0"
        assert cell(app, "status") == "● connected"
        assert cell(app, "latency").startswith("poll ") and cell(app, "latency").endswith("ms")
        assert cell(app, "cost") == "vtop 0.4%"
        assert cell(app, "uptime").startswith("up 3h")
        running = panel(app, "running").text("value")
        assert running.endswith("/ 64 req"), running
        assert panel(app, "kv").text("value").endswith("%")
        assert panel(app, "ttft").text("value").startswith("p50 ")
        assert "queue" in panel(app, "ttft").text("note")
        lines = [line.text for line in app.triage.lines]
        assert lines[0].startswith("memory-ceiling: KV cache ≥ 95% with an empty queue")
        assert lines[1] == "→ --kv-cache-dtype fp8  --gpu-memory-utilization 0.95"
        assert lines[2].startswith("budget-too-small: 40 of 60 s")
        assert "explained by memory-ceiling" in lines[3]
        assert "RTX 4090" in app.gpus.lines[0] and "util 91%" in app.gpus.lines[0]
        assert not app.endpoint_list.display


async def test_polling_ingests_frames_and_never_overlaps() -> None:
    class SlowSource(ScriptedSource):
        active = 0
        most = 0

        async def poll(self) -> Frame:
            SlowSource.active += 1
            SlowSource.most = max(SlowSource.most, SlowSource.active)
            await asyncio.sleep(0.08)  # slower than the interval
            SlowSource.active -= 1
            return await super().poll()

    eps = [pages.Endpoint(EP)]
    source = SlowSource(pages.frames(eps, 50))
    app = VtopApp(source, Monitor(), interval=0.5, self_cpu=lambda: 0.4)
    app.interval = 0.02  # below the ladder, to poll fast in a test
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.6)
        assert source.polled >= 3
        assert app.monitor.frames == source.polled or app.monitor.frames == source.polled - 1
        assert SlowSource.most == 1
    assert source.closed


async def test_a_failing_poll_is_one_notice_and_polling_goes_on() -> None:
    class FlakySource(ScriptedSource):
        async def poll(self) -> Frame:
            if self.polled in (1, 2):  # a source bug, twice in a row
                self.polled += 1
                raise RuntimeError("source bug")
            return await super().poll()

    source = FlakySource(pages.frames([pages.Endpoint(EP)], 50))
    app = VtopApp(source, Monitor(), interval=0.5, self_cpu=lambda: 0.4)
    app.interval = 0.02
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.5)
        notices = [n.message for n in app._notifications]
        assert notices.count("poll failed: source bug") == 1, notices
        assert source.polled >= 5
        assert app.monitor.frames == source.polled - 2 or app.monitor.frames == source.polled - 3
    broken = VtopApp(
        ScriptedSource(pages.frames([pages.Endpoint(EP)], 50)),
        Monitor(),
        interval=0.5,
        self_cpu=lambda: 0.4,
    )
    broken.interval = 0.02

    def view_bug(frame: Frame) -> None:
        raise RuntimeError("view bug")

    broken.ingest = view_bug  # type: ignore[method-assign]
    async with broken.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        notices = [n.message for n in broken._notifications]
        assert notices == ["poll failed: view bug"], "one notice, not one per poll"
        assert isinstance(broken.source, ScriptedSource) and broken.source.polled >= 5


async def test_reconnecting_keeps_history_and_says_why() -> None:
    ep = pages.Endpoint(EP, down=set(range(400, 440)))
    status = ConnectionStatus("reconnecting", attempt=3, retry_in_s=4.0)
    app, _ = build_app(history=440, endpoints=[ep], status=lambda e: status)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert cell(app, "status") == "↻ reconnecting (attempt 3, next in 4 s)"
        assert app.header.levels["status"] is Severity.CRITICAL
        first, why = app.triage.lines[:2]
        assert (first.kind, first.label) == ("error", "DOWN")
        assert first.text == f"cannot connect to {EP}/metrics"
        assert (why.kind, why.text) == ("error", "connection refused")
        assert panel(app, "running").text("value") == "– / 64"  # unknown, not 0
        trend = panel(app, "running").trend
        assert trend is not None
        known = [v for v in trend.values if v is not None]
        assert known, "history collected before the outage stays on the chart"
        assert trend.values[-1] is None, "the outage is a gap, not a zero"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://vllm-prod-east.internal:8000"])
async def test_at_80_columns_an_outage_leaves_the_endpoint_whole(url: str) -> None:
    """The server is down and vtop reconnects: the header's longest text. The endpoint is the
    last thing to be cut (it was `127.0.0.` beside `↻ reconnecting …`): vtop's cost, then the
    cadence give way, and the connection's text is cut only after them."""
    ep = pages.Endpoint(url, down=set(range(400, 440)))
    status = ConnectionStatus("reconnecting", attempt=4, retry_in_s=8.0)
    app, _ = build_app(history=440, endpoints=[ep], status=lambda e: status)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        top = screen_lines(app)[0]
        where = url.removeprefix("http://")
        assert top.startswith(f" {where}  "), top
        assert f"↻ {status.text}" in top, top  # the whole of it: attempt and next try
        assert "…" not in top, top
        assert cell(app, "endpoint") == where
        assert "poll" not in top, "no latency column kept during an outage"
    app, _ = build_app(history=440, endpoints=[ep], status=lambda e: CONNECTED)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        top = screen_lines(app)[0]
        assert top.startswith(f" {where}  ") and "● connected" in top and "poll " in top, top


async def test_restart_is_marked_on_the_charts() -> None:
    ep = pages.Endpoint(EP, restart_at={300})
    app, _ = build_app(endpoints=[ep])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        trend = panel(app, "generation").trend
        assert trend is not None and len(trend.restarts) == 1
        assert all(v is None or v >= 0 for v in trend.values), "a reset never draws negative"


async def test_pause_freezes_the_screen_but_not_the_monitor() -> None:
    app, source = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        before = panel(app, "generation").text("value")
        await pilot.press("p")
        assert app.paused and cell(app, "cadence").startswith("⏸ paused")
        for _ in range(8):
            app.ingest(await source.poll())
        await pilot.pause()
        assert app.monitor.frames == 408
        assert panel(app, "generation").text("value") == before
        await pilot.press("p")
        await pilot.pause()
        assert not app.paused and not cell(app, "cadence").startswith("⏸")
        assert panel(app, "generation").text("value") != before


async def test_interval_keys_step_through_the_ladder_and_say_where_it_ends() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:

        def said() -> list[str]:
            return [n.message for n in app._notifications if "poll interval" in n.message]

        await pilot.press("plus")
        assert app.interval == 0.5 and cell(app, "cadence") == "0.5s · 5m"
        assert said() == [], "a step that happens needs no notice"
        await pilot.press("plus")
        assert app.interval == 0.5  # the fastest rung
        assert said() == ["fastest poll interval already: 0.5s"]
        await pilot.press("minus", "minus", "minus")
        assert app.interval == 5.0 and cell(app, "cadence") == "5s · 5m"
        await pilot.press("minus", "minus", "minus")
        assert app.interval == 30.0 and said()[-1] == "slowest poll interval already: 30s"


async def test_window_key_cycles_and_redraws_stats() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        seen = []
        for _ in range(4):
            await pilot.press("w")
            await pilot.pause()
            seen.append(
                (
                    app.window_s,
                    panel(app, "running").text("stats").split()[0],
                    app.query_one("#panels").border_title,
                )
            )
        # A window longer than the history says what it holds (issue 25: "queue non-empty
        # 100% of 1h" after 30 s); the border names the window chosen.
        held = seen[0][1]
        assert held.endswith("s") and 300 < int(held[:-1]) < 900, seen
        assert seen == [
            (900.0, held, "Scheduler · 15m"),
            (3600.0, held, "Scheduler · 1h"),
            (60.0, "1m", "Scheduler · 1m"),
            (300.0, "5m", "Scheduler · 5m"),
        ]


async def test_help_opens_and_closes() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_enter_opens_the_finding_with_formula_inputs_and_provenance() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.focused is app.triage
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding is FIRING
        body = str(app.screen.query_one("#finding-body").render())
        assert "kv_usage avg 5m" in body and "97.2%" in body
        assert "formula   fp8 halves KV bytes per token" in body
        assert "kv_capacity_tokens = 53248 (read from the server" in body
        assert "current   auto (read from the server" in body
        await pilot.press("c")
        assert app.clipboard == "--kv-cache-dtype fp8 --gpu-memory-utilization 0.95"
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]


async def test_finding_detail_scrolls_to_every_line_at_80x24() -> None:
    """The box around the detail must not clip its scroll area: at 80×24 the last
    recommendation (the main advice) and the closing hint are reachable."""
    app = build_sim_app("memory-ceiling", findings=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, FindingScreen)
        seen: list[str] = []
        for _ in range(12):
            seen += screen_lines(app)
            await pilot.press("pagedown")
            await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        end = screen_text(app)
        seen += end.splitlines()
        text = "\n".join(seen)
        assert "--max-num-seqs 104" in text and "max_num_seqs=104" in text
        assert "max(floor_to(fit_after, 8)" in text
        # the last line of the last recommendation: its last input
        assert "vllm:cache_config_info kv_cache_size_tokens)" in end
        assert "Escape closes · c copies the flags" in end


async def test_arrows_move_between_findings() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.triage.selected is FIRING
        await pilot.press("down")
        assert app.triage.selected is not None and app.triage.selected.rule == "budget-too-small"
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen)
        assert "holding for 40 of 60 s" in str(app.screen.query_one("#finding-body").render())


async def test_focus_draws_the_panel_cursor_at_once_and_blur_takes_it_away() -> None:
    """Textual calls a widget's on_focus before it sets `has_focus`: the focused column's
    panel must be drawn active on focus, not at the next key."""
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        column = app.grid.columns[0]
        top = column.order[column.cursor] + ".top"

        def active() -> bool:
            return any("$accent" in str(span.style) for span in column._content[top].spans)

        assert not active()
        column.focus()
        await pilot.pause()
        assert active()
        app.triage.focus()
        await pilot.pause()
        assert not active()


async def test_explain_shows_the_catalog_help_of_the_focused_panel() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.grid.columns[0].focus()
        await pilot.press("right", "right")  # running -> waiting -> KV cache
        selected = app.grid.selected
        assert selected is not None and selected.id == "kv"
        await pilot.press("e")
        assert isinstance(app.screen, ExplainScreen)
        body = str(app.screen.query_one("#explain-body").render())
        assert "Share of the KV-cache pool in use" in body
        assert "vllm:kv_cache_usage_perc" in body and "warning at 0.9" in body
        await pilot.press("escape")
        app.triage.focus()
        await pilot.press("e")
        assert "pending while its condition holds" in str(
            app.screen.query_one("#explain-body").render()
        )


async def test_copy_puts_every_recommended_flag_on_the_clipboard() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("tab")  # away from the triage panel: copy all firing flags
        await pilot.press("c")
        assert app.clipboard == "--kv-cache-dtype fp8 --gpu-memory-utilization 0.95"
        assert any("copied" in (n.title or "") for n in app._notifications)


async def test_copy_without_recommendation_says_so() -> None:
    app, _ = build_app(findings=())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("c")
        assert app.clipboard == ""
        assert any("nothing to copy" in n.message for n in app._notifications)
        assert app.triage.lines[0].text == "no bottleneck found"


async def test_record_key_writes_a_trace_that_reads_back(tmp_path: Path) -> None:
    from vtop.trace.reader import TraceReader

    app, source = build_app()
    app.record_dir = tmp_path
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        assert app.recorder is not None and cell(app, "cadence").startswith("⏺ rec")
        for _ in range(5):
            app.ingest(await source.poll())
        await pilot.press("r")
        assert app.recorder is None and not cell(app, "cadence").startswith("⏺")
        assert any(n.title == "recording stopped" for n in app._notifications)
    (trace,) = tmp_path.glob("vtop-*.vtrace")
    with TraceReader(trace) as reader:
        polls = list(reader.polls())
    assert len(polls) == 5
    assert polls[0].frame().scrapes[0].endpoint == EP


async def test_engines_breakdown_for_data_parallelism() -> None:
    ep = pages.Endpoint(EP, maker=pages.PageMaker(engines=2))
    app, _ = build_app(endpoints=[ep])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("b")
        assert isinstance(app.screen, EnginesScreen)
        from textual.widgets import DataTable

        table = app.screen.query_one(DataTable)
        assert table.row_count == 2
        # one model: no model column, the engine first
        assert [str(k.value) for k in table.columns][:2] == ["engine", "running"]
        engines = [str(table.get_row_at(i)[0]) for i in range(2)]
        assert engines == ["0", "1"]
        await pilot.press("escape")
        assert not isinstance(app.screen, EnginesScreen)


async def test_several_endpoints_get_rows_and_drill_down() -> None:
    a = pages.Endpoint(EP)
    b = pages.Endpoint("http://10.0.0.7:8000", maker=pages.PageMaker(pressure=0.3))
    app, _ = build_app(endpoints=[a, b])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.endpoint_list.display
        rows = app.endpoint_list.rows
        assert [r.name for r in rows] == ["localhost:8000", "10.0.0.7:8000"]
        assert rows[0].verdict.startswith("CRIT Memory ceiling") and rows[1].verdict == "OK"
        first = panel(app, "running").text("value")
        await pilot.press("2")
        assert cell(app, "endpoint") == "10.0.0.7:8000 (2/2)"
        assert panel(app, "running").text("value") != first
        app.endpoint_list.focus()
        await pilot.press("up")
        assert app.selected == 0


async def test_fleet_rows_carry_preemptions_and_ttft_and_a_row_per_engine() -> None:
    a = pages.Endpoint(EP, maker=pages.PageMaker(engines=2))
    b = pages.Endpoint("http://10.0.0.7:8000", maker=pages.PageMaker(pressure=0.3))
    app, _ = build_app(endpoints=[a, b])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        rows = _box_rows(screen_lines(app), "Endpoints")
        assert rows[0].split()[:8] == [
            "endpoint",
            "run",
            "wait",
            "KV",
            "pre/s",
            "tok/s",
            "TTFT99",
            "top",
        ]
        first, e0, e1, second = rows[1:5]
        assert "localhost:8000" in first and "10.0.0.7:8000" in second
        assert "engine 0" in e0 and "engine 1" in e1 and "CRIT" not in e0 + e1
        # the endpoint's figures are its engines' together, each engine its own
        run = [int(r.split()[3].split("/")[0]) for r in (e0, e1)]
        assert int(first.split()[4].split("/")[0]) == sum(run) and run[0] != run[1]
        # the columns agree with the selected endpoint's panels
        ttft_p99 = panel(app, "ttft").text("value").split("p99 ")[1]
        assert first.split()[9] == ttft_p99
        assert first.split()[7] == panel(app, "preemptions").text("value").split()[0]
    app, _ = build_app(endpoints=[a, b])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        rows = _box_rows(screen_lines(app), "Endpoints")
        assert len(rows) == 5  # header, endpoint, two engines, endpoint: nothing wraps
        # the least important left out first (how many depends on the verdicts' width then)
        shown = {c.id for c in fleet.COLUMNS if f" {c.header} " in f" {rows[0]} "}
        dropped = [c for c in fleet.DROP_ORDER if c not in shown]
        assert dropped and dropped == list(fleet.DROP_ORDER[: len(dropped)]), rows[0]
        assert {"run", "kv"} <= shown, rows[0]
        assert "engine 1" in rows[3] and "10.0.0.7:8000" in rows[4]


async def test_no_gpu_says_why_in_one_line() -> None:
    app, _ = build_app(gpu=pages.NO_GPU)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.gpus.lines == ["no GPU readable: " + (pages.NO_GPU.unavailable or "")]


async def test_the_engines_own_findings_reach_the_triage_panel() -> None:
    app = build_sim_app("memory-ceiling", findings=None)  # the monitor runs the real rules
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        firing = [line for line in app.triage.lines if line.kind == "firing"]
        assert firing and firing[0].finding is not None
        assert firing[0].finding.rule == "memory-ceiling"
        action = app.triage.lines[app.triage.lines.index(firing[0]) + 1]
        assert action.kind == "action" and action.text.startswith("→ --")
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen)
        assert "formula" in str(app.screen.query_one("#finding-body").render())


async def test_triage_absent_is_not_all_clear() -> None:
    eps = [pages.Endpoint(EP)]
    monitor = Monitor()
    for frame in pages.frames(eps, 30):
        monitor.feed(frame)
    app = VtopApp(
        ScriptedSource(pages.frames(eps, 2, start=30)),
        monitor,
        autopoll=False,
        findings=lambda m, e: None,
        self_cpu=lambda: 0.4,
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "not loaded" in app.triage.lines[0].text


async def test_command_palette_offers_vtop_commands() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        titles = [c.title for c in app.get_system_commands(app.screen_stack[0])]
        assert {"Pause / resume", "Next window", "Copy recommended flags"} <= set(titles)


async def test_the_palettes_keys_opens_the_key_reference_and_escape_closes_it() -> None:
    """Textual's "Keys" command docked a panel beside the dashboard that Escape did not close;
    it squashed the panels and garbled the footer. It is vtop's key reference now, a modal."""
    app, _ = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        before = screen_lines(app)
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"keys")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "command palette" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and not app.screen.query("HelpPanel")
        assert screen_lines(app)[-1] == before[-1], "the footer as it was"
        assert app.triage.region.width == 80 and app.grid.region.width == 80


async def test_quit_closes_the_source() -> None:
    app, source = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
    assert source.closed


async def test_light_theme_and_unknown_theme() -> None:
    app, _ = build_app(theme="light")
    assert app.theme == "textual-light"
    with pytest.raises(ValueError, match="unknown theme 'neon'"):
        build_app(theme="neon")


async def test_no_color_draws_no_colour_at_all_and_keeps_severity_readable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, _ = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        coloured = colour_codes(terminal_bytes(app))
    assert len(coloured) >= 4  # the check sees colours where there are some
    monkeypatch.setenv("NO_COLOR", "1")
    for size in ((80, 24), (160, 50)):
        app, _ = build_app()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            assert app.no_color
            drawn = terminal_bytes(app)
            assert colour_codes(drawn) == set(), size  # no-color.org: not even greys
            assert "\x1b[1;" in drawn or "\x1b[7;" in drawn  # emphasis stays (bold, reverse)
            assert app.triage.lines[0].label == "CRIT"  # the word, not only a colour
            assert "CRIT" in screen_text(app)
    app, _ = build_app(findings=(PENDING,))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.no_color
        row = _box_rows(screen_lines(app), "Triage")[0]
        assert row.startswith("▶?    likely budget-too-small · 40 of 60 s"), row  # the cursor


async def test_compact_layout_at_80x24_keeps_the_verdict_and_every_signal() -> None:
    app, _ = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.has_class("-narrow") and app.grid.compact
        assert app.triage.region.height >= 3 and app.triage.region.y < 24
        assert app.grid.region.height == 9 + 2 and app.grid.region.bottom <= 23
        assert [c.display for c in app.grid.columns] == [True, False, False]
        for pid in app.grid.order:
            trend = app.grid.trend(pid)
            assert trend is not None and len(trend.values) >= 15, pid
            assert app.grid.value(pid), pid
        assert app.gpus.region.bottom <= 23


@pytest.mark.parametrize(
    ("size", "scenario"),
    [
        ((100, 30), "memory-ceiling"),
        ((100, 30), "budget-too-small"),
        ((120, 28), "budget-too-small"),
    ],
)
async def test_a_short_wide_screen_uses_its_rows(size: tuple[int, int], scenario: str) -> None:
    """At 100×30 the compact layout's nine rows left eight empty rows under the GPU: where the
    boxed panels fit under the verdict they are drawn, and they fill the screen."""
    app = build_sim_app(scenario, findings=None)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert not app.grid.compact and app.screen.has_class("-short")
        lines = screen_lines(app)
        blank = [y for y, line in enumerate(lines) if not line.strip()]
        assert blank == [], (blank, "\n".join(lines))
        assert app.gpus.region.bottom == size[1] - 1, "the GPU box ends over the footer"
        assert app.triage.region.y == 1 and app.grid.region.y == app.triage.region.bottom
        assert app.grid.region.height >= 15
        for pid in app.grid.order:
            trend = app.grid.trend(pid)
            assert app.grid.value(pid) and trend is not None and len(trend.values) >= 20, pid
            assert app.grid.note(pid) or app.grid.stats(pid), pid
        text = "\n".join(lines)
        for title in ("Running", "Waiting", "KV cache", "Time to first token"):
            assert f"─ {title} " in text, title


async def test_the_compact_layout_stays_where_the_boxes_would_not_fit() -> None:
    """80 columns, or a screen too short for the boxes under the verdict and the GPU."""
    for size in ((80, 30), (100, 26)):
        app = build_sim_app("memory-ceiling", findings=None)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            assert app.grid.compact and app.screen.has_class("-compact"), size
            assert app.gpus.region.bottom <= size[1] - 1, size


async def test_a_pending_warning_rule_leads_as_likely_never_as_all_clear_nor_advice() -> None:
    app, _ = build_app(findings=(UNDERLOADED, PENDING))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        first = app.triage.lines[0]
        assert (first.kind, first.finding) == ("likely", PENDING)
        triage = _box_rows(screen_lines(app), "Triage")
        assert (
            triage[0] == "▶?    likely budget-too-small · 40 of 60 s · Scheduler budget too small"
        )
        text = "\n".join(triage)
        assert "no bottleneck found" not in text and "OK" not in text
        assert "→" not in text and "--" not in text, "no advice before the verdict"
        assert "underloaded: 3 of 10 s" in text  # the other rules' lines stay, dimmed
        assert app.triage.selected is PENDING
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen) and app.screen.finding is PENDING
        body = " ".join(str(app.screen.query_one("#finding-body").render()).split())
        assert "it fires in 20 s more if it goes on holding" in body
        assert "none yet: advice comes with the verdict" in body


async def test_the_cursor_follows_the_lead_until_the_user_moves_it() -> None:
    """The rule seen first after attaching is often a symptom; the likely cause, then the
    verdict, that takes the lead is what Enter opens, unless the user chose another line."""
    from dataclasses import replace

    from vtop.ui.views.verdict import lines

    symptom = replace(PENDING, rule="ttft-queueing", title="Time to first token is queueing")
    app, _ = build_app(findings=())
    async with app.run_test(size=SIZE) as pilot:
        app.triage.show(lines([symptom], polls=3))
        assert app.triage.selected is symptom
        app.triage.show(lines([PENDING, symptom], polls=4))  # the cause takes the lead
        assert app.triage.selected is PENDING
        await pilot.press("down")
        assert app.triage.selected is symptom
        moved = replace(symptom, held_s=41.0)
        app.triage.show(lines([PENDING, moved], polls=5))
        assert app.triage.selected is moved, "the user's choice stays"
        await pilot.press("up")  # back on the lead: it follows the lead again
        app.triage.show(lines([FIRING, moved], polls=6))
        assert app.triage.selected is FIRING
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen) and app.screen.finding is FIRING


@pytest.mark.parametrize("look", ["dark", "light", "no-color"])
async def test_the_cursor_starts_on_the_root_cause_plainly_and_enter_opens_it(
    look: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real rules on a server whose batch cap is the wall: budget-too-small fires and
    explains ttft-queueing (suppressed). The cursor, a `▶` that reads without colour, is on
    the verdict's first row, every finding's line names its rule, and Enter opens the root
    cause, not the symptom it explains."""
    if look == "no-color":
        monkeypatch.setenv("NO_COLOR", "1")
    app = build_sim_app(
        "budget-too-small", findings=None, theme="dark" if look != "light" else look
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        kinds = [(line.kind, line.finding.rule) for line in app.triage.lines if line.finding]
        assert ("suppressed", "ttft-queueing") in kinds, kinds  # the symptom is on screen too
        assert kinds[0] == ("firing", "budget-too-small"), kinds
        triage = _box_rows(screen_lines(app), "Triage")
        marked = [row for row in triage if row.startswith("▶")]
        assert marked == [triage[0]], triage  # one cursor, on the root cause's first row
        assert marked[0].startswith("▶WARN budget-too-small: "), marked
        assert any(row.lstrip().startswith("·    ttft-queueing: explained by") for row in triage)
        drawn = terminal_bytes(app)
        if look == "no-color":
            assert colour_codes(drawn) == set()
        assert "▶" in drawn
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding.rule == "budget-too-small"
        assert app.screen.finding.state == "firing"
        await pilot.press("escape", "down")
        triage = _box_rows(screen_lines(app), "Triage")
        assert [row for row in triage if row.startswith("▶")] == [
            "▶·    ttft-queueing: explained by budget-too-small"
        ], triage  # the cursor moves whole findings: the flags' row is the verdict's
        app.grid.columns[0].focus()
        await pilot.pause()
        triage = _box_rows(screen_lines(app), "Triage")
        assert not [row for row in triage if row.startswith("▶")], "no cursor without focus"


async def test_a_new_verdict_takes_the_cursor_from_a_symptom() -> None:
    """The user looked at a symptom while the cause was only likely; when the cause's verdict
    comes, the cursor is on it: Enter opens the news, not the line chosen a minute ago."""
    from dataclasses import replace

    from vtop.ui.views.verdict import lines

    symptom = replace(PENDING, rule="ttft-queueing", title="Time to first token is queueing")
    app, _ = build_app(findings=())
    async with app.run_test(size=SIZE) as pilot:
        app.triage.show(lines([PENDING, symptom], polls=4))
        await pilot.press("down")
        assert app.triage.selected is symptom
        fired = replace(PENDING, state="firing", needs_s=None, held_s=60.0)
        explained = replace(symptom, state="suppressed", suppressed_by="budget-too-small")
        app.triage.show(lines([fired, explained], polls=5))
        assert app.triage.selected is fired
        await pilot.press("enter")
        assert isinstance(app.screen, FindingScreen) and app.screen.finding is fired


def test_the_likely_line_is_drawn_apart_from_a_verdict() -> None:
    from vtop.ui.views.verdict import lines
    from vtop.ui.widgets.triage_panel import render_line

    likely = lines([PENDING], polls=9)[0]
    verdict = lines([FIRING], polls=9)[0]
    drawn, firing = render_line(likely, 80, False), render_line(verdict, 80, False)
    assert drawn.plain.startswith(" ?    likely ") and firing.plain.startswith(" CRIT ")
    styles = [str(span.style) for span in drawn.spans]
    assert not [s for s in styles if "reverse" in s], styles  # a reversed label is a verdict
    assert any("reverse" in str(span.style) for span in firing.spans)
    assert any("italic" in s for s in styles) and any("$warning" in s for s in styles)


async def test_fleet_rows_say_likely_while_a_warning_rule_accrues_and_ok_only_when_none() -> None:
    a = pages.Endpoint(EP)
    b = pages.Endpoint("http://10.0.0.7:8000", maker=pages.PageMaker(pressure=0.3))
    app, _ = build_app(endpoints=[a, b], findings=(PENDING,))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first, second = app.endpoint_list.rows
        assert (first.verdict, first.likely) == ("likely Scheduler budget too small", True)
        assert (second.verdict, second.likely) == ("OK", False)
        rows = _box_rows(screen_lines(app), "Endpoints")
        assert rows[1].endswith("likely Scheduler budget too small") and "OK" not in rows[1]
        assert rows[2].endswith("OK")


async def test_attaching_to_a_sick_server_likely_cause_then_verdict_with_the_real_rules() -> None:
    """vtop attaches to a simulated server five minutes into its trouble and polls it four
    times a second: the rules' conditions hold from the first polls and the verdict comes
    about twelve seconds later. Until it does, the panel leads with the likely cause (never
    "no bottleneck found", never advice), and a rule on screen stays on screen."""
    app, source = build_attach_app(("budget-too-small",), 60)
    async with app.run_test(size=(80, 24)) as pilot:
        likely_polls, fired_at, shown = 0, None, set[str]()
        for i in range(60):
            app.ingest(await source.poll())
            await pilot.pause()
            (view,) = app.monitor.endpoints.values()
            lines = app.triage.lines
            text = "\n".join(_box_rows(screen_lines(app), "Triage"))
            assert "no bottleneck found" not in text and "gathering evidence" not in text, i
            rules = {line.finding.rule for line in lines if line.finding is not None}
            assert shown <= rules, f"poll {i}: {shown - rules} vanished"
            if any(f.state == "firing" for f in view.findings):
                fired_at = i if fired_at is None else fired_at
                assert lines[0].kind == "firing" and "likely" not in text
                assert lines[1].kind == "action" and "--max-num-seqs" in text
            elif any(f.state in ACCRUING and f.severity >= Severity.WARNING for f in view.findings):
                likely_polls += 1
                assert lines[0].kind == "likely" and text.startswith("▶?    likely "), text
                assert "→" not in text and "--" not in text, "no advice before the verdict"
            shown = {line.finding.rule for line in lines if line.finding is not None}
        assert likely_polls >= 20 and fired_at is not None and fired_at >= likely_polls
        assert lines[0].finding is not None and lines[0].finding.rule == "budget-too-small"
        await pilot.press("enter")  # the verdict, not the symptom seen first
        # (by value: a prediction finishing between the last poll and the key redraws the
        # triage lines with equal findings of their own)
        assert isinstance(app.screen, FindingScreen)
        opened = app.screen.finding
        assert (opened.rule, opened.state) == ("budget-too-small", "firing"), opened


async def test_a_fleet_row_is_likely_until_its_verdict_and_ok_only_where_nothing_holds() -> None:
    app, source = build_attach_app(("budget-too-small", "healthy"), 60)
    async with app.run_test(size=SIZE) as pilot:
        verdicts: list[str] = []
        healthy_said: list[str] = []
        for _ in range(60):
            app.ingest(await source.poll())
            await pilot.pause()
            sick, healthy = app.endpoint_list.rows
            views = list(app.monitor.endpoints.values())
            assert not views[1].findings
            healthy_said.append(healthy.verdict)
            if any(f.state == "firing" for f in views[0].findings):
                assert sick.verdict.startswith("WARN ") and not sick.likely
            elif views[0].findings:
                assert sick.verdict.startswith("likely ") and sick.likely, sick.verdict
            verdicts.append(sick.verdict)
        assert "OK" not in verdicts[2:]
        assert any(v.startswith("likely ") for v in verdicts)
        # Issue 25: no "OK" before the quickest verdict could have come (10 s watched): the
        # healthy row says it is judging, then OK for good.
        first_ok = healthy_said.index("OK")
        assert all(v.startswith("judging ") for v in healthy_said[:first_ok]), healthy_said
        assert first_ok > 0 and set(healthy_said[first_ok:]) == {"OK"}, healthy_said
        assert verdicts[-1].startswith("WARN Scheduler budget too small")


def _box_rows(lines: list[str], title: str) -> list[str]:
    """The inside of the box titled `title` on screen, a string per row."""
    top = next(i for i, line in enumerate(lines) if f"─ {title} " in line)
    bottom = next(i for i in range(top + 1, len(lines)) if lines[i].lstrip().startswith("╰"))
    return [line.strip().strip("│").strip() for line in lines[top + 1 : bottom]]


async def test_compact_verdict_wraps_into_free_rows_and_gpu_fields_stay_whole() -> None:
    app = build_sim_app("memory-ceiling", findings=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        triage = _box_rows(lines, "Triage")
        firing = next(line for line in app.triage.lines if line.kind == "firing")
        assert len(firing.text) > 80 - 9  # too long for one row: it must wrap to show whole
        assert not any(row.endswith("…") for row in triage), triage
        assert " ".join(" ".join(triage).split()).find(" ".join(firing.text.split())) >= 0
        assert "--max-num-seqs 104" in " ".join(triage)
        assert "max_num_seqs=104" not in " ".join(triage)  # no room: the flag alone
        (gpu,) = _box_rows(lines, "GPU")
        assert "mem 22.1/24.0 GiB" in gpu and not gpu.endswith("…"), gpu
        assert lines[-1].strip(), "the footer is on the last row"


async def test_triage_grows_when_the_same_lines_start_to_wrap() -> None:
    from vtop.ui.views.verdict import Line

    app, _ = build_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.triage.show([Line("info", "short", label="…"), Line("info", "also short")])
        await pilot.pause()
        before = app.triage.region.height
        app.triage.show([Line("info", "short", label="…"), Line("info", "long " * 20)])
        await pilot.pause()
        assert app.triage.region.height == before + 1
        assert "long long" in " ".join(_box_rows(screen_lines(app), "Triage")[1:])


async def test_the_triage_says_each_flag_once_and_the_detail_its_engine_argument() -> None:
    # Issue 29: `→ --max-num-seqs 104 (max_num_seqs=104)` said the change twice.
    app = build_sim_app("memory-ceiling", findings=None)
    # 60 rows: the detail fits whole once the twin's lines arrive (at 40 they may scroll the
    # recommendations off the screen, depending on whether the twin ran before the look)
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause()
        triage = " ".join(_box_rows(screen_lines(app), "Triage"))
        assert "→ --kv-cache-dtype fp8  --max-num-seqs 104" in triage, triage
        assert "max_num_seqs=104" not in triage and "kv_cache_dtype=fp8" not in triage
        await pilot.press("enter")
        await pilot.pause()
        assert "engine    max_num_seqs=104" in " ".join(screen_lines(app))


async def test_wider_terminals_show_more_buckets_not_wider_cells() -> None:
    widths = {}
    for size in ((120, 40), (200, 60)):
        app, _ = build_app()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            trend = panel(app, "running").trend
            assert trend is not None
            widths[size] = (trend.buckets.cells, trend.buckets.bucket_s)
    (c1, b1), (c2, b2) = widths[(120, 40)], widths[(200, 60)]
    assert c2 > c1 and b2 <= b1
    assert c2 * b2 > c1 * b1 or b2 < b1


async def test_repaints_only_what_changed() -> None:
    app, source = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown: list[str] = []
        original = FieldsWidget.put

        def spy(self: FieldsWidget, name: str, text: object) -> bool:
            changed = original(self, name, text)  # type: ignore[arg-type]
            if changed:
                shown.append(f"{self.id}.{name}")
            return changed

        FieldsWidget.put = spy  # type: ignore[method-assign]
        try:
            frame = await source.poll()
            app.ingest(frame)
            first = list(shown)
            shown.clear()
            # The same page again one second later: only time-dependent text may change.
            again = Frame(frame.t + 1.0, frame.scrapes, frame.gpu, frame.host)
            app.ingest(again)
        finally:
            FieldsWidget.put = original  # type: ignore[method-assign]
        assert first, "new data repaints something"
        assert "header-info.model" not in shown and "header-info.version" not in shown
        assert not [s for s in shown if ".chart" in s or ".stats" in s], (
            "within a bucket, charts and statistics stay as they are"
        )
        assert len(shown) < len(first)


async def test_cursor_blink_is_off_in_inputs() -> None:
    app, _ = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        from textual.widgets import Input

        assert all(not i.cursor_blink for i in app.screen.query(Input))


def test_process_cpu_measures_over_a_span() -> None:
    from vtop.ui.app import ProcessCpu

    cpu = ProcessCpu()
    assert cpu() is None
    cpu._last = (time.monotonic() - 11.0, time.process_time() - 0.11)
    value = cpu()
    assert value is not None and 0.5 < value < 2.0


def test_findings_fixture_is_unordered_on_purpose() -> None:
    assert FINDINGS[0].state == "pending"  # the panel must sort, not trust the order


async def test_live_source_end_to_end_connects_then_reconnects() -> None:
    """The real LiveSource against a real HTTP server that starts failing."""
    from tests.pageserver import Answer, PageServer, Script
    from vtop.sources.live import LiveSource
    from vtop.sources.vllm import ScrapeOptions

    maker = pages.PageMaker()
    state = {"up": True}

    def metrics() -> Answer:
        if not state["up"]:
            return Answer(b"gone", status=503)
        return Answer(maker.page().encode())

    script = Script(
        {
            "/metrics": metrics,
            "/version": Answer(b'{"version": "0.32.0"}'),
            "/v1/models": Answer(b'{"data": [{"id": "qwen", "max_model_len": 8192}]}'),
        }
    )
    with PageServer(script) as srv:
        source = LiveSource([srv.url], ScrapeOptions(timeout_s=2.0))
        app = VtopApp(source, Monitor(), interval=0.5, self_cpu=lambda: 0.4)
        app.interval = 0.05
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if app.monitor.frames >= 3:
                    break
            assert cell(app, "status") == "● connected"
            assert cell(app, "version") == "vLLM 0.32.0" and cell(app, "model") == "qwen"
            assert panel(app, "running").text("value").endswith("req")
            state["up"] = False
            for _ in range(100):
                await pilot.pause(0.05)
                if cell(app, "status").startswith("↻ reconnecting"):
                    break
            assert cell(app, "status").startswith("↻ reconnecting (attempt ")
            assert app.triage.lines[0].kind == "error" and "503" in app.triage.lines[0].text
            (view,) = app.monitor.endpoints.values()
            assert view.store.count("running") >= 3, "the history collected stays"
    assert source.endpoints and not app.is_running


def test_cli_rejects_an_unknown_theme_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from vtop.cli import build_parser, run_tui

    args = build_parser().parse_args(["--url", "http://127.0.0.1:1", "--theme", "neon"])
    assert run_tui(ScriptedSource(pages.frames([pages.Endpoint(EP)], 1)), args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown theme 'neon'" in err


async def test_the_header_holds_a_jittering_poll_latency_and_shows_a_real_change() -> None:
    """A poll's latency jitters by tens of percent; each new number would repaint the top of
    the screen. The header keeps the one shown while new ones stay within 1.5× of it at the
    same level, for at most 10 s of frame time."""

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield HeaderBar()

    def head(ms: float | None, t: float, lvl: Severity = Severity.OK) -> Headline:
        return Headline(
            endpoint="localhost:8000",
            model="m",
            version="vLLM 0.32.0",
            uptime="up 1m",
            status="● connected",
            status_level=Severity.OK,
            latency=f"poll {ms:g}ms" if ms is not None else "",
            latency_level=lvl,
            latency_s=ms / 1000 if ms is not None else None,
            t=t,
        )

    app = Host()
    async with app.run_test(size=(120, 3)) as pilot:
        bar = app.query_one(HeaderBar)

        async def shown(ms: float | None, t: float, lvl: Severity = Severity.OK) -> str:
            bar.show(head(ms, t, lvl), cadence="1s · 5m", cost="vtop 0.4%")
            await pilot.pause()
            return bar.text("latency")

        assert await shown(20, 0) == "poll 20ms"
        assert await shown(26, 1) == "poll 20ms"  # jitter: held
        assert await shown(14, 2) == "poll 20ms"
        assert await shown(31, 3) == "poll 31ms"  # more than 1.5× away: shown
        assert await shown(30, 4) == "poll 31ms"
        assert await shown(30, 12.5) == "poll 31ms"
        assert await shown(30, 13) == "poll 30ms"  # held 10 s at most
        assert await shown(35, 15, Severity.WARNING) == "poll 35ms"  # a new level: shown
        assert await shown(None, 16) == ""  # a failed poll shows no latency
        assert await shown(36, 17) == "poll 36ms"


async def test_the_host_is_read_only_while_recording(tmp_path: Path) -> None:
    """Host readings (CPU, memory, vtop's own cost) go only into recordings: the real
    LiveSource over a real HTTP server leaves them out until `r`, and again after it."""
    from tests.pageserver import Answer, PageServer, Script
    from vtop.sources.host import HostSampler
    from vtop.sources.live import LiveSource
    from vtop.sources.vllm import ScrapeOptions
    from vtop.trace.reader import TraceReader

    maker = pages.PageMaker()
    script = Script({"/metrics": lambda: Answer(maker.page().encode())})
    with PageServer(script) as srv:
        source = LiveSource([srv.url], ScrapeOptions(timeout_s=2.0), host=HostSampler().read)
        app = VtopApp(source, Monitor(), interval=0.5, self_cpu=lambda: 0.4, record_dir=tmp_path)
        app.interval = 0.05

        async def polls(n: int) -> None:
            until = app.monitor.frames + n
            for _ in range(200):
                await pilot.pause(0.05)
                if app.monitor.frames >= until:
                    return
            raise AssertionError(f"fewer than {n} polls")

        async with app.run_test(size=SIZE) as pilot:
            await polls(3)
            assert app.monitor.host is None
            await pilot.press("r")
            await polls(3)
            assert app.monitor.host is not None and app.monitor.host.mem_total_bytes
            await pilot.press("r")
            await polls(2)
            assert app.monitor.host is None
    (trace,) = tmp_path.glob("vtop-*.vtrace")
    with TraceReader(trace) as reader:
        hosts = [poll.frame().host for poll in reader.polls()]
    assert len(hosts) >= 3
    assert all(h is not None and h.mem_total_bytes for h in hosts), hosts
