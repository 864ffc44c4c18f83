"""The figure catalog (`vtop.figures`): one spec per figure, read by every view.

A figure is named in the report's JSON, the what-if's, the self-check's and the screens'; each
of those names must be a figure of the catalog, so a view cannot invent a label of its own.
`window_figures` must give what the catalog's per-figure reads give on a recorded trace (a
gauge's mean, a counter's rate, a percentile held to its whole), and the one cap parser must
refuse what no batch can be (a switch, a word, zero).
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from vtop import figures
from vtop.figures import CATALOG, FIGURE, window_figures
from vtop.model import Knob
from vtop.report.document import SignalName, TimelineName
from vtop.report.text import SIGNAL_ORDER
from vtop.report.window import CHART, EndpointStats
from vtop.triage.columns import Columns
from vtop.triage.schema import Operand
from vtop.ui.views.panels import PANELS
from vtop.whatif.check import FAMILIES, FIGURES
from vtop.whatif.check import figures as compared
from vtop.whatif.watched import read_trace

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "ttft-queueing.vtrace"


def test_every_name_a_view_keys_a_figure_by_is_in_the_catalog() -> None:
    named = {
        *get_args(SignalName),
        *get_args(TimelineName),
        *FIGURES,
        *(n for family in FAMILIES for n in family.members),
        *EndpointStats("x", 0.0, None).latency,
    }
    assert named <= set(FIGURE), named - set(FIGURE)
    # the report lists its signals in the catalog's order: the gauges, then the rates
    assert (*figures.GAUGES, *figures.RATES) == SIGNAL_ORDER
    assert get_args(TimelineName) == CHART


def test_names_and_labels_are_one_each() -> None:
    assert len(FIGURE) == len(CATALOG)
    for field in ("label", "brief"):
        said = [getattr(f, field) for f in CATALOG]
        assert len(set(said)) == len(said), field
    percentiles = [f for f in CATALOG if f.read == "quantile"]
    assert {f.brief for f in percentiles} >= {"queue p50", "TTFT p90", "ITL p50"}
    assert all(f.q is not None and f.label == f.brief for f in percentiles)


def test_each_panel_is_titled_and_unitised_as_its_figure() -> None:
    by_signal = {f.signal: f for f in CATALOG if f.read in ("gauge", "rate", "latency")}
    for panel in PANELS:
        figure = by_signal[panel.signal]
        assert (panel.title, panel.short, panel.unit) == (
            figure.title,
            figure.short,
            figure.screen_unit,
        )
        assert panel.ratio == (figure.unit == "ratio")


@pytest.mark.parametrize(
    ("name", "value", "screen", "report"),
    [
        ("kv_usage", 0.8412, "84.1%", "84.1%"),
        ("generation_tokens_per_s", 1234.5, "1.23k", "1,234"),
        ("preemptions_per_s", 0.5, "0.5", "0.5"),
        ("ttft_p90", 1.234, "1.23s", "1.23 s"),
        ("itl_p50", 0.0391, "39.1ms", "39 ms"),
        ("running", None, "–", "–"),
    ],
)
def test_a_figure_prints_in_its_unit(
    name: str, value: float | None, screen: str, report: str
) -> None:
    figure = FIGURE[name]
    assert (figure.screen(value), figure.report(value)) == (screen, report)


def test_window_figures_are_the_catalogs_reads_of_a_recorded_server() -> None:
    store = read_trace(str(TRACE)).store
    window_s = 120.0
    got = window_figures(store, window_s)
    scope = figures.ENDPOINT
    for f in CATALOG:
        k = f.key(scope)
        if f.read == "gauge":
            assert got[f.name] == figures.gauge_window(store, k, window_s).avg
        elif f.read == "rate":
            assert got[f.name] == figures.counter_window(store, k, window_s).per_s
        elif f.read == "quantile":
            assert f.q is not None
            raw = figures.latency(store, k, window_s).quantile(f.q)
            value = got[f.name]
            assert raw is not None and value is not None
            assert value <= raw
        elif f.read == "mean":
            assert got[f.name] == figures.latency(store, k, window_s).mean
        else:
            assert f.name not in got
    # the trace queues: the queue's percentiles are read, and held to TTFT's
    for q in ("p50", "p90"):
        queue, ttft = got[f"queue_{q}"], got[f"ttft_{q}"]
        assert queue is not None and ttft is not None and 0 < queue <= ttft
    assert got["requests_per_s"] is not None and got["requests_per_s"] > 0
    # the self-check compares its figures, as the catalog computes them
    assert compared(store, window_s) == {n: got[n] for n in FIGURES}


def test_a_part_is_held_to_a_whole_no_figure_prints() -> None:
    """The recorded 2-seat server: TTFT p90 falls in vLLM's 40-80 s bucket (72 s read off it),
    the end-to-end p90 in its 40-50 s one (48 s). A request's first token comes no later than its
    end, so the self-check, the what-if and the report's table all read 48 s."""
    trace = ROOT / "tests" / "fixtures" / "real-regimes" / "budget2-slowhost.vtrace"
    store = read_trace(str(trace)).store
    scope = figures.ENDPOINT
    raw_ttft = figures.latency(store, figures.TTFT.key(scope), None).p90
    e2e = figures.latency(store, figures.E2E.key(scope), None).p90
    assert raw_ttft is not None and e2e is not None and e2e < 0.8 * raw_ttft
    assert window_figures(store, None)["ttft_p90"] == e2e


@pytest.mark.parametrize(
    ("value", "seats"),
    [(256, 256.0), (12.5, 12.5), (0, None), (-4, None), (True, None), ("auto", None)],
)
def test_one_batch_cap_for_the_views_and_the_rules(
    value: int | float | str, seats: float | None
) -> None:
    knobs = {"max_num_seqs": Knob("max_num_seqs", value, "flag", "test")}
    cap = figures.cap(knobs)
    assert (cap.value if cap is not None else None) == seats
    store = read_trace(str(TRACE)).store
    fill = Columns(store, knobs).get(Operand("batch_fill"), 30.0)
    running = Columns(store, {}).get(Operand("running"), 30.0)
    if seats is None:
        assert all(v is None for v in fill)
    else:
        assert fill == [None if r is None else r / seats for r in running]
