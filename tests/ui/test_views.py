"""The screen's numbers without a terminal: buckets, charts, readings, verdict lines, formats."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.ui import pages
from tests.ui.scripted import EP, FINDINGS, FIRING, PENDING, UNDERLOADED
from vtop import fmt
from vtop.model import ACCRUING, Finding, FindingState, Histogram, Knob, SeriesKey, Severity
from vtop.monitor import Monitor
from vtop.signals.store import Store
from vtop.sources.status import CONNECTED, ConnectionStatus
from vtop.triage.engine import lacking
from vtop.ui import chart, detail, panels, trend, verdict
from vtop.ui.headline import headline, short_url
from vtop.ui.thresholds import FALLBACK, from_rules, level, table_for

# -- buckets -----------------------------------------------------------------------------------


def test_bucket_size_is_nice_and_never_below_the_interval() -> None:
    assert trend.bucket_seconds(300, 60, 1.0) == 5.0
    assert trend.bucket_seconds(300, 62, 1.0) == 5.0
    assert trend.bucket_seconds(300, 35, 1.0) == 10.0
    assert trend.bucket_seconds(60, 200, 1.0) == 1.0
    assert trend.bucket_seconds(60, 200, 5.0) == 5.0
    assert trend.bucket_seconds(3600, 30, 1.0) == 120.0


def test_buckets_cover_completed_spans_only() -> None:
    b = trend.Buckets.at(1003.0, 5.0, 4)
    assert b.edges == [980.0, 985.0, 990.0, 995.0, 1000.0]
    assert b.cell_of(999.9) == 3 and b.cell_of(1000.0) is None and b.cell_of(979.0) is None
    # The chart moves only when a boundary passes, not on every poll.
    assert trend.Buckets.at(1004.9, 5.0, 4) == b
    assert trend.Buckets.at(1005.0, 5.0, 4) != b


def test_gauge_buckets_average_and_gaps_are_none() -> None:
    times = [980.0, 981.0, 985.0, 986.0, 991.0, 996.0]
    values: list[float | None] = [1.0, 3.0, 4.0, None, None, 8.0]
    b = trend.Buckets.at(1001.0, 5.0, 4)
    assert trend.gauge(times, values, b) == [2.0, 4.0, None, 8.0]
    assert trend.gauge(times, values, b, agg="max") == [3.0, 4.0, None, 8.0]


def test_rate_buckets_use_the_last_known_samples_before_each_edge() -> None:
    times = [979.0, 984.0, 989.0, 994.0, 999.0]
    values: list[float | None] = [0.0, 50.0, 100.0, None, 300.0]
    b = trend.Buckets.at(1000.0, 5.0, 4)
    # [990, 995) holds only the missed poll: unknown. [995, 1000) spans 989 -> 999.
    assert trend.rate(times, values, b) == [10.0, 10.0, None, 20.0]
    # A long outage is not smeared into the first cell after it.
    times2 = [960.0, 961.0, 996.0, 999.0]
    assert trend.rate(times2, [0.0, 10.0, 400.0, 430.0], b) == [None, None, None, None]


def test_counter_resets_never_draw_negative() -> None:
    b = trend.Buckets.at(1000.0, 5.0, 2)
    assert trend.rate([989.0, 994.0, 999.0], [100.0, 50.0, 60.0], b) == [0.0, 2.0]


def test_quantile_buckets_take_histogram_deltas() -> None:
    def h(c1: float, c2: float, total: float) -> Histogram:
        return Histogram((0.1, 1.0), (c1, c2), c2, total)

    times = [979.0, 984.0, 989.0]
    # observations spread as interpolation assumes: 10 around 0.05, then 10 around 0.55
    hists: list[Histogram | None] = [h(0, 0, 0.0), h(10, 10, 0.5), h(10, 20, 6.0)]
    b = trend.Buckets.at(990.0, 5.0, 2)
    got = trend.quantile(times, hists, b, 0.5)
    assert got[0] == pytest.approx(0.05)
    assert got[1] is not None and 0.1 < got[1] <= 1.0


# -- chart drawing -----------------------------------------------------------------------------


def test_chart_rows_levels_gaps_and_restarts() -> None:
    rows = chart.rows([0.0, 4.0, None, 8.0], 2, 8.0, restarts=[3])
    text = ["".join(t for t, _ in r) for r in rows]
    assert text == ["  " + " " + "↻", "▁█·█"]
    styles = [[s for _, s in r] for r in rows]
    assert styles[1] == ["bar", "gap", "bar"]  # runs are merged by style
    assert chart.scale_max([None, None]) == 1.0
    assert chart.scale_max([2.0], floor=64.0) == 64.0


def cell_by_cell(values: list[float | None], height: int, top: float,
                 restarts: list[int]) -> list[list[chart.Run]]:  # fmt: skip
    """The chart's definition, one cell at a time: eighth blocks, a dotted baseline where
    unknown, a restart mark in the top row, runs of one style merged."""
    lv = chart.levels(values, height, top)
    out = []
    for r in range(height):
        runs: list[chart.Run] = []
        for c, n in enumerate(lv):
            style: chart.RunStyle
            if r == 0 and c in restarts:
                ch, style = chart.RESTART, "restart"
            elif n is None:
                ch, style = (chart.GAP if r == height - 1 else " "), "gap"
            else:
                ch, style = chart.BLOCKS[max(0, min(8, n - (height - 1 - r) * 8))], "bar"
            if runs and runs[-1][1] == style:
                runs[-1] = (runs[-1][0] + ch, style)
            else:
                runs.append((ch, style))
        out.append(runs)
    return out


@given(st.lists(st.one_of(st.none(), st.floats(-1, 12)), max_size=50), st.integers(1, 9),
       st.lists(st.integers(-2, 52), max_size=3))  # fmt: skip
def test_chart_rows_are_the_cell_by_cell_definition(
    values: list[float | None], height: int, restarts: list[int]
) -> None:
    assert chart.rows(values, height, 10.0, restarts) == cell_by_cell(values, height, 10.0,
                                                                       restarts)  # fmt: skip


# -- readings ----------------------------------------------------------------------------------


def fed_monitor(
    n: int = 300, *, maker: pages.PageMaker | None = None, restart_at: set[int] | None = None
) -> Monitor:
    monitor = Monitor()
    eps = [pages.Endpoint(EP, maker or pages.PageMaker(), restart_at=restart_at or set())]
    for frame in pages.frames(eps, n):
        monitor.feed(frame)
    return monitor


def view_of(monitor: Monitor, window: float = 300.0) -> panels.View:
    ev = monitor.endpoints[EP]
    return panels.View(ev.store, ev.knobs, window, 1.0)


def test_running_reads_against_its_cap_with_provenance() -> None:
    v = view_of(fed_monitor())
    r = panels.read(panels.BY_ID["running"], v)
    last = v.store.last("running")
    assert last is not None and r.value == f"{fmt.num(last)} / 64"
    assert panels.summarize(panels.BY_ID["running"], v).note == "cap: max_num_seqs"
    assumed = dict(v.knobs)
    assumed["max_num_seqs"] = Knob("max_num_seqs", 256, "default", "vLLM 0.32 default")
    v2 = panels.View(v.store, assumed, 300.0, 1.0)
    assert panels.summarize(panels.BY_ID["running"], v2).note == (
        "cap: max_num_seqs (default, assumed)"
    )


def test_running_at_cap_is_a_warning() -> None:
    v = view_of(fed_monitor())
    knobs = dict(v.knobs)
    knobs["max_num_seqs"] = Knob("max_num_seqs", 8, "flag", "vtop --max-num-seqs")
    r = panels.read(panels.BY_ID["running"], panels.View(v.store, knobs, 300.0, 1.0))
    assert r.level is Severity.WARNING


def test_kv_reading_level_uses_the_threshold_table() -> None:
    v = view_of(fed_monitor(maker=pages.PageMaker(pressure=1.5)))
    r = panels.read(panels.BY_ID["kv"], v)
    assert r.value == "100%" and r.level is Severity.CRITICAL
    assert panels.summarize(panels.BY_ID["kv"], v).note == "pool of 53.2k tokens"


def test_waiting_note_says_how_often_requests_queued() -> None:
    v = view_of(fed_monitor())
    note = panels.summarize(panels.BY_ID["waiting"], v).note
    values = [x for x in v.store.values("waiting", 300.0) if x is not None]
    share = round(100 * sum(1 for x in values if x > 0) / len(values))
    assert note == f"queue non-empty {share}% of 5m" and 0 < share < 100


def test_rate_and_latency_readings() -> None:
    v = view_of(fed_monitor())
    gen = panels.read(panels.BY_ID["generation"], v)
    assert gen.value != fmt.DASH
    assert panels.summarize(panels.BY_ID["generation"], v).stats.startswith("5m avg ")
    ttft = panels.read(panels.BY_ID["ttft"], v)
    assert ttft.value.startswith("p50 ") and " p99 " in ttft.value
    note = panels.summarize(panels.BY_ID["ttft"], v).note
    assert note.startswith("queue ") and "prefill" in note
    done = panels.summarize(panels.BY_ID["finished"], v)
    assert done.note.startswith("stop ") and "length" in done.note


def test_missing_signals_read_as_dash_never_zero() -> None:
    monitor = Monitor()
    from vtop.model import Frame, Scrape

    monitor.feed(Frame(pages.T0, (Scrape(EP, pages.T0, error="refused"),)))
    v = view_of(monitor)
    for spec in panels.PANELS:
        r = panels.read(spec, v)
        digits = r.value.replace("p50", "").replace("p99", "")
        assert not any(c.isdigit() for c in digits), (spec.id, r.value)


def test_trend_of_panel_has_restart_marks_and_fixed_ratio_scale() -> None:
    monitor = fed_monitor(restart_at={250})
    v = view_of(monitor)
    kv = panels.trend_of(panels.BY_ID["kv"], v, 40)
    assert kv is not None and kv.top == 1.0 and len(kv.values) == 40
    gen = panels.trend_of(panels.BY_ID["generation"], v, 40)
    assert gen is not None and len(gen.restarts) == 1


def test_per_engine_views_split_the_aggregate() -> None:
    monitor = fed_monitor(maker=pages.PageMaker(engines=2))
    v = view_of(monitor)
    total = v.store.last("running")
    parts = []
    for model, engine in v.store.engines():
        if engine:
            scoped = panels.View(v.store, v.knobs, 300.0, 1.0, model, engine)
            parts.append(scoped.store.last(scoped.key("running")))
    assert len(parts) == 2 and sum(p or 0 for p in parts) == total


# -- header ------------------------------------------------------------------------------------


def test_headline_fields() -> None:
    monitor = fed_monitor()
    head = headline(monitor.endpoints[EP], CONNECTED)
    assert head.endpoint == "localhost:8000" and head.model == "Qwen2.5-7B-Instruct"
    assert head.version == "vLLM 0.32.0" and head.status == "● connected"
    assert head.uptime.startswith("up 3h")
    assert short_url("https://gpu-box:8443/") == "https://gpu-box:8443"
    down = headline(monitor.endpoints[EP], ConnectionStatus("reconnecting", 2, 2.0))
    assert down.status_level is Severity.CRITICAL
    assert down.status == "↻ reconnecting (attempt 2, next in 2 s)"
    replaying = headline(monitor.endpoints[EP], ConnectionStatus("replay", detail="replay x"))
    assert (replaying.status, replaying.status_level) == ("● replay x", Severity.OK)
    refused = headline(monitor.endpoints[EP], ConnectionStatus("down", detail="up == 0"))
    assert (refused.status, refused.status_level) == ("○ up == 0", Severity.WARNING)


# -- verdict and detail --------------------------------------------------------------------------


def test_verdict_orders_firing_then_pending_then_suppressed() -> None:
    lines = verdict.lines(FINDINGS, polls=10)
    assert [line.kind for line in lines] == ["firing", "action", "pending", "suppressed"]
    assert lines[0].label == "CRIT"
    assert lines[2].text.startswith("budget-too-small: 40 of 60 s")


def test_rules_waiting_for_evidence_are_not_all_clear() -> None:
    waiting = lacking(Finding(rule="memory-ceiling", title="KV cache is the wall", endpoint=EP,
                              severity=Severity.OK, state="insufficient", summary=""),
                      ["12 of 30 polls"])  # fmt: skip
    lines = verdict.lines([waiting], polls=12)
    assert [line.kind for line in lines] == ["info", "insufficient"]
    assert lines[0].text == "gathering evidence before judging"
    assert lines[1].text == "memory-ceiling: not enough data yet: 12 of 30 polls"
    lines = verdict.lines([waiting, PENDING], polls=12)  # a warning-level rule accrues too
    assert [line.kind for line in lines] == ["likely", "insufficient"]


INSUFFICIENT = lacking(Finding(rule="long-prompt-starvation", title="Long prompts starve short ones",
                               endpoint=EP, severity=Severity.WARNING, state="insufficient",
                               summary="", held_s=6.0, for_s=30.0),
                       ["7 of 20 finished requests"])  # fmt: skip
HELD_BACK = replace(PENDING, rule="ttft-queueing", title="Time to first token is queueing",
                    held_s=50.0, for_s=52.0, needs_s=2.0,
                    evidence=(("held back", "budget-too-small would explain it"),))  # fmt: skip
"""A symptom held back for its root cause: it has held longer, and comes after it."""


def test_a_warning_rule_accruing_leads_as_the_likely_cause_without_advice() -> None:
    lines = verdict.lines([PENDING, UNDERLOADED], polls=30)
    first = lines[0]
    assert (first.kind, first.label, first.finding) == ("likely", "?", PENDING)
    assert first.severity is Severity.WARNING
    assert first.text == "likely budget-too-small · 40 of 60 s"
    assert first.wide == "likely budget-too-small · 40 of 60 s · Scheduler budget too small"
    texts = [line.text for line in lines]
    assert "no bottleneck found" not in texts and "gathering evidence before judging" not in texts
    assert not [line for line in lines if line.kind in ("action", "firing")], "no advice"
    # its own pending line is not repeated under it; the others stay, dimmed
    assert [(line.kind, line.finding) for line in lines[1:]] == [("pending", UNDERLOADED)]


def test_the_likely_cause_of_an_insufficient_rule_says_what_it_waits_for() -> None:
    (only,) = verdict.lines([INSUFFICIENT], polls=30)
    assert (only.kind, only.finding) == ("likely", INSUFFICIENT)
    assert only.text == "likely long-prompt-starvation · 7 of 20 finished requests"


def test_the_likely_cause_is_the_first_in_the_engines_order_not_the_furthest_along() -> None:
    # The engine's order: pending before insufficient, then severity, then root cause first.
    lines = verdict.lines([PENDING, HELD_BACK, INSUFFICIENT], polls=30)
    assert lines[0].finding is PENDING
    assert [line.finding for line in lines[1:]] == [HELD_BACK, INSUFFICIENT]  # by progress
    assert verdict.likely([INSUFFICIENT, HELD_BACK, PENDING]) is HELD_BACK
    critical = replace(INSUFFICIENT, severity=Severity.CRITICAL)
    assert verdict.likely([PENDING, critical]) is PENDING  # pending first, whatever the level
    worse = replace(HELD_BACK, severity=Severity.CRITICAL)
    assert verdict.likely([PENDING, worse]) is worse  # then the worse level


def test_info_rules_accruing_are_no_likely_cause_and_no_bar_to_all_clear() -> None:
    waiting = lacking(replace(UNDERLOADED, state="insufficient", needs_s=None),
                      ["3 of 20 finished requests"])  # fmt: skip
    lines = verdict.lines([UNDERLOADED, waiting], polls=30)
    assert [line.kind for line in lines] == ["ok", "pending", "insufficient"]
    assert lines[0].text == "no bottleneck found"
    assert verdict.likely([UNDERLOADED, waiting]) is None


def test_no_likely_cause_beside_a_verdict_or_an_outage() -> None:
    lines = verdict.lines([PENDING, FIRING], polls=30)
    assert "likely" not in [line.kind for line in lines] and verdict.likely(FINDINGS) is None
    down = verdict.lines([PENDING], error="cannot connect to x: connection refused", polls=30)
    assert [line.kind for line in down] == ["error", "error", "pending"]


def test_progress_reads_held_of_held_plus_needed() -> None:
    f = replace(PENDING, held_s=8.2, for_s=15.0, needs_s=6.8)
    assert verdict.progress(f) == "budget-too-small: 8 of 15 s"
    assert verdict.lines([f], polls=9)[0].text == "likely budget-too-small · 8 of 15 s"
    # needs_s rules where for_s disagrees (a symptom held back keeps the for_s it fired on)
    assert verdict.progress(replace(f, for_s=4.0)) == "budget-too-small: 8 of 15 s"
    assert verdict.progress(replace(f, needs_s=None)) == "budget-too-small: 8 of 15 s"


_STATES: list[FindingState] = ["pending", "insufficient", "suppressed", "firing"]


@given(st.lists(st.tuples(st.sampled_from(_STATES), st.sampled_from(list(Severity)), st.booleans()), max_size=6),
       st.integers(0, 50))  # fmt: skip
def test_never_all_clear_nor_advice_while_a_warning_rule_accrues_unjudged(
    specs: list[tuple[FindingState, Severity, bool]], polls: int
) -> None:
    found = [replace(PENDING if state != "firing" else FIRING, rule=f"r{i}", state=state,
                     severity=sev, needs_s=5.0 if timed else None,
                     recommendations=FIRING.recommendations if state == "firing" else ())
             for i, (state, sev, timed) in enumerate(specs)]  # fmt: skip
    lines = verdict.lines(found, polls=polls)
    texts = [line.text for line in lines]
    firing = [f for f in found if f.state == "firing"]
    accruing = [f for f in found if f.state in ACCRUING and f.severity >= Severity.WARNING]
    if not firing and accruing:
        assert lines[0].kind == "likely" and lines[0].finding in accruing
        assert "no bottleneck found" not in texts
        assert "gathering evidence before judging" not in texts
        assert not [line for line in lines if line.kind == "action"]
    else:
        assert "likely" not in [line.kind for line in lines]
    # every finding has its line, once
    assert sorted(f.rule for line in lines if line.kind != "action" and (f := line.finding)) == (
        sorted(f.rule for f in found)
    )


def test_verdict_with_error_none_and_nothing() -> None:
    assert verdict.lines([], polls=0)[0].text == "collecting the first polls…"
    assert verdict.lines([], polls=5)[0].text == "no bottleneck found"
    down = verdict.lines([], error="cannot connect", polls=5)
    assert down[0].kind == "error" and down[0].label == "DOWN" and len(down) == 1
    absent = verdict.lines(None, polls=5)
    assert "not loaded" in absent[0].text


def test_an_error_splits_after_its_url_never_inside_vllm_s_series_prefix() -> None:
    # Issue 29: `…/metrics has no vllm: series` broke at `vllm: ` and lost its colon.
    page = f"{EP}/metrics has no vllm: series (is the server started with --disable-log-stats?)"
    (line,) = verdict.error_lines(page)
    assert line.text == page
    what, why = verdict.error_lines(f"cannot connect to {EP}/metrics: connection refused")
    assert (what.text, why.text) == (f"cannot connect to {EP}/metrics", "connection refused")


def test_recommended_flags_are_unique_and_firing_only() -> None:
    twice = Finding(**{**{f: getattr(FIRING, f) for f in FIRING.__slots__}, "rule": "other"})
    assert verdict.recommended_flags([PENDING, FIRING, twice]) == (
        "--kv-cache-dtype fp8 --gpu-memory-utilization 0.95"
    )
    assert verdict.recommended_flags([PENDING]) == ""


def test_detail_lists_evidence_formula_inputs_and_provenance() -> None:
    text = "\n".join(detail.lines(FIRING, now=pages.T0 + 500))
    assert "CRIT  firing  Memory ceiling" in text
    assert "rule memory-ceiling" in text
    assert "kv_usage avg 5m" in text
    assert "--kv-cache-dtype fp8" in text and "confidence high" in text
    assert "formula   min(0.95, used + free headroom)" in text
    assert "gpu_mem_free_gib = 1.4" in text
    assert "(read from the server: vllm:cache_config_info kv_cache_size_tokens)" in text
    assert (
        "engine    kv_cache_dtype=fp8" in text and "engine    gpu_memory_utilization=0.95" in text
    )
    # how long, once: the rule's count (it has a duration), not the wall-clock age as well
    assert "held 180 s (it fired after 60 s)" in text and "since" not in text


def test_detail_of_an_accruing_finding_says_what_it_still_needs_and_gives_no_advice() -> None:
    pending = replace(PENDING, held_s=8.2, for_s=15.0, needs_s=6.8)
    text = "\n".join(detail.lines(pending, now=pages.T0 + 500))
    assert "holding for 8 of 15 s so far: it fires in 7 s more if it goes on holding" in text
    assert "none yet: advice comes with the verdict" in text and "no flag change" not in text
    text = "\n".join(detail.lines(INSUFFICIENT, now=pages.T0 + 500))
    assert "it can fire once it has more data (7 of 20 finished requests)" in text
    assert "fired after" not in text and "none yet: advice comes" in text
    assert "holding for 40 of 60 s before it fires" in "\n".join(
        detail.lines(replace(PENDING, needs_s=None))
    )


def test_fleet_row_says_likely_not_ok_while_a_warning_rule_accrues() -> None:
    from vtop.ui import fleet

    monitor = Monitor()
    for frame in pages.frames([pages.Endpoint(EP)], 5):
        monitor.feed(frame)
    view = monitor.endpoints[EP]
    row = fleet.row(view, [PENDING, UNDERLOADED], CONNECTED)
    assert (row.verdict, row.severity, row.likely) == (
        "likely Scheduler budget too small", Severity.WARNING, True)  # fmt: skip
    insufficient = fleet.row(view, [replace(INSUFFICIENT, title="")], CONNECTED)
    assert insufficient.verdict == "likely long-prompt-starvation" and insufficient.likely
    assert fleet.row(view, [UNDERLOADED], CONNECTED).verdict == "OK"
    assert fleet.row(view, [], CONNECTED).verdict == "OK"
    firing = fleet.row(view, [PENDING, FIRING], CONNECTED)
    assert firing.verdict == "CRIT Memory ceiling" and not firing.likely
    down = fleet.row(view, [PENDING], ConnectionStatus("reconnecting", 2, 0.4))
    assert down.verdict == "reconnecting (attempt 2, next in 0 s)" and not down.likely


def test_fleet_row_and_panel_read_one_cap() -> None:
    """A cap given as a float (a targets file's label, a formula's result) is the same cap on
    the panel and on the fleet row; the row used to read only an int and dropped it."""
    from vtop.ui import fleet

    v = view_of(fed_monitor())
    view = fed_monitor().endpoints[EP]
    for value, run in ((1024, "/1024"), (96.0, "/96"), (12.5, "/12.5")):
        view.knobs["max_num_seqs"] = Knob("max_num_seqs", value, "flag", "--max-num-seqs")
        row = fleet.row(view, [], CONNECTED)
        assert row.cells["run"].endswith(run)
        panel = panels.read(panels.BY_ID["running"], panels.View(v.store, view.knobs, 300.0, 1.0))
        assert panel.value.endswith(f" / {fmt.num(float(value))}")
    view.knobs["max_num_seqs"] = Knob("max_num_seqs", True, "flag", "not a number")
    assert "/" not in fleet.row(view, [], CONNECTED).cells["run"]


def test_detail_says_since_when_the_rule_has_no_duration() -> None:
    text = "\n".join(detail.lines(replace(FIRING, for_s=0.0), now=pages.T0 + 500))
    assert "since 5m ago" in text and "held" not in text


def test_detail_wraps_continuations_under_the_value() -> None:
    rows = detail.rows(FIRING, now=pages.T0 + 500)
    wrapped = detail.wrap(rows, 60)
    assert all(len(line) <= 60 for line in wrapped)
    i = next(i for i, line in enumerate(wrapped) if "kv_capacity_tokens = 53248" in line)
    column = wrapped[i].index("53248")
    follow = wrapped[i + 1]
    assert follow.strip() and len(follow) - len(follow.lstrip()) == column, wrapped[i : i + 2]
    ev = detail.wrap([detail.Row("  KV capacity  122512 tokens, 2118 per sequence (p90)", 15)], 40)
    assert ev == ["  KV capacity  122512 tokens, 2118 per", "               sequence (p90)"]


# -- formats and thresholds ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "–"), (0, "0"), (7, "7"), (12.5, "12.5"), (0.1234, "0.123"), (999.6, "1k"),
     (1234, "1.23k"), (12_345_678, "12.3M"), (float("nan"), "–")],
)  # fmt: skip
def test_num(value: float | None, text: str) -> None:
    assert fmt.num(value) == text


def test_time_formats() -> None:
    assert fmt.seconds(0.0000123) == "12µs"
    assert fmt.seconds(0.0123) == "12.3ms"
    assert fmt.seconds(1.234) == "1.23s"
    assert fmt.seconds(125) == "2m05s"
    assert fmt.pct(0.841) == "84.1%" and fmt.pct(1.0) == "100%" and fmt.pct(None) == "–"


def test_threshold_levels() -> None:
    assert level("kv_usage", 0.5) is Severity.OK
    assert level("kv_usage", 0.9) is Severity.WARNING
    assert level("kv_usage", 0.99) is Severity.CRITICAL
    assert level("kv_usage", None) is Severity.OK
    assert level("not-a-signal", 1e9) is Severity.OK
    assert all(t.source for t in FALLBACK.values())


def test_thresholds_come_from_the_rules() -> None:
    from vtop.triage.engine import Engine

    rules = Engine.from_catalog(user=False).rules
    derived = from_rules(rules)
    kv = derived["kv_usage"]
    assert (kv.warning, kv.critical) == (0.9, 0.98) and "memory-ceiling" in kv.source
    pre = derived["preemptions"]
    assert pre.warning is not None and 0.001 < pre.warning < 0.0011 and pre.critical == 1.0
    assert pre.describe() == "warning above 0.001, critical at 1"
    assert derived["waiting"].describe() == "warning above 0"
    assert level("waiting", 0.0, derived) is Severity.OK
    assert level("waiting", 1.0, derived) is Severity.WARNING
    table = table_for(rules)
    assert table["gpu_temp"] == FALLBACK["gpu_temp"]  # no rule judges it: the fallback stays
    assert table_for([]) == dict(FALLBACK)


def test_triage_rows_go_to_the_lines_that_wrap_top_first() -> None:
    from vtop.ui.widgets.triage_panel import allot

    assert allot([3, 1, 2], 4) == [2, 1, 1]  # one spare row: the verdict's
    assert allot([3, 1, 2], 9) == [3, 1, 2]  # room for all: nothing cut
    assert allot([1, 1, 1], 2) is None  # too few rows: a row per line, scrolling


def test_no_all_clear_before_the_quickest_verdict_could_come() -> None:
    # Issue 25: the dashboard said "OK no bottleneck found" for the first 8-14 s of a server
    # sending waves; no rule can speak in under 10 s of polls.
    early = verdict.lines([], polls=12, watched_s=4.2, quickest_s=10.0)
    assert [(line.kind, line.text) for line in early] == [
        ("info", "judging: 4 of 10 s before an all-clear")
    ]
    later = verdict.lines([], polls=40, watched_s=10.0, quickest_s=10.0)
    assert [(line.kind, line.text) for line in later] == [("ok", "no bottleneck found")]


def test_rates_read_over_the_rate_span_and_latency_over_the_latency_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two spans, once both called RECENT_S: a rate "now" is read over `figures.rate_span` of
    the poll interval (the fleet row: the span it is given), latency percentiles over
    `figures.LATENCY_SPAN_S`; swapping them would show a minute's rate or ten seconds' p99."""
    from vtop import figures
    from vtop.ui import fleet

    spans: list[tuple[str, float | None]] = []
    real_rate, real_latency = figures.rate, figures.latency

    def rate(store: Store, key: SeriesKey, span: float | None) -> float | None:
        spans.append(("rate", span))
        return real_rate(store, key, span)

    def latency(store: Store, key: SeriesKey, span: float | None) -> figures.Latency:
        spans.append(("latency", span))
        return real_latency(store, key, span)

    monkeypatch.setattr(figures, "rate", rate)
    monkeypatch.setattr(figures, "latency", latency)
    ev = fed_monitor().endpoints[EP]
    slow = panels.View(ev.store, ev.knobs, 300.0, 5.0)  # 5 s polls: a 15 s rate span
    panels.read(panels.BY_ID["finished"], slow)
    panels.read(panels.BY_ID["itl"], slow)
    assert spans == [("rate", figures.rate_span(5.0)), ("latency", figures.LATENCY_SPAN_S)]
    for span, rates in ((figures.rate_span(5.0), 15.0), (None, figures.DEFAULT_RATE_SPAN_S)):
        spans.clear()
        fleet.row(ev, [], CONNECTED) if span is None else fleet.row(ev, [], CONNECTED, span)
        assert {span for kind, span in spans if kind == "rate"} == {rates}
        assert {span for kind, span in spans if kind == "latency"} == {figures.LATENCY_SPAN_S}
    assert figures.DEFAULT_RATE_SPAN_S == figures.rate_span(1.0) == 10.0
