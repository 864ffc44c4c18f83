"""The catalog on pages a real vLLM server wrote (tests/fixtures/metrics/vllm-0.32).

The captured series are ten real /metrics pages a second apart, too short for rules that wait
for a minute of evidence; they are replayed in a loop, each loop's counters and histograms
carried on from the last (as the server's would have), at the captured scrape latencies. Every
page goes through the real parser, the knobs come from the page's own
`vllm:cache_config_info` plus `--max-num-seqs 16` as the user would tell vtop, and the shipped
catalog runs through `Monitor`. Two real regimes (reference/vllm.md):

- `kv-exhausted-series` (engine-bound, 40 clients, 16 seats, a 3,072-token pool): running
  8-14, waiting ~30, KV 0.83-1.0, preemptions every second. memory-ceiling must fire, and no
  rule may advise raising max_num_seqs.
- `frontend-bound-series` (the tiny model, API server starved): most pages read running =
  waiting = KV = 0 while tokens and preemptions climb. The gauges lie: frontend-bound must
  fire (and not client-static-batching, which the empty reads resemble); the counters still
  show the KV wall, and again nothing may advise raising max_num_seqs.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from vtop.model import EndpointInfo, Finding, Frame, Histogram, Scrape, SeriesKey
from vtop.monitor import Monitor
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME, Kind
from vtop.signals.extract import PageReader
from vtop.sources import discovery
from vtop.triage.engine import Engine

PAGES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-0.32"
EP = "http://127.0.0.1:8000"


def looped(series: str, seconds: float) -> Iterator[Scrape]:
    """The series' pages again and again, counters carried on, one poll per captured gap."""
    folder = PAGES / series
    rows = list(csv.DictReader((folder / "index.tsv").open(), delimiter="\t"))
    reader = PageReader()
    pages = [
        reader.read(
            (folder / r["file"]).read_text(),
            endpoint=EP,
            t=0.0,
            latency_s=float(r["scrape_latency_s"]),
        )
        for r in rows
    ]
    times = [float(r["wall_time_unix"]) for r in rows]
    gap = (times[-1] - times[0]) / (len(times) - 1)
    first, second, last = pages[0], pages[1], pages[-1]

    def step(k: SeriesKey) -> float:  # a loop's increase: all gaps of the series plus one
        return (last.scalars[k] - first.scalars[k]) + (second.scalars[k] - first.scalars[k])

    def hstep(k: SeriesKey) -> Histogram | None:
        a, b = (
            hist.delta(last.histograms[k], first.histograms[k]),
            hist.delta(second.histograms[k], first.histograms[k]),
        )
        return hist.add(a, b) if a is not None and b is not None else None

    counters = {k: step(k) for k in first.scalars if BY_NAME[k.signal].kind is Kind.COUNTER}
    hsteps = {k: hstep(k) for k in first.histograms}
    t, loop = 0.0, 0
    while t < seconds:
        for i, page in enumerate(pages):
            t = loop * (times[-1] - times[0] + gap) + (times[i] - times[0])
            scalars = dict(page.scalars)
            for k, inc in counters.items():
                if k in scalars:
                    scalars[k] += loop * inc
            hists = dict(page.histograms)
            for k, h in hsteps.items():
                if k in hists and h is not None:
                    for _ in range(loop):
                        hists[k] = hist.add(hists[k], h)
            yield replace(page, t=t, scalars=scalars, histograms=hists)
        loop += 1


def replay(series: str, seconds: float = 300.0) -> list[list[Finding]]:
    monitor = Monitor(engine=Engine(Engine.from_catalog(user=False).rules))
    server = EndpointInfo(version="0.32.0", models=("vtop/engine",), max_model_len=2048)
    history = []
    for i, scrape in enumerate(looped(series, seconds)):
        if i == 0:
            knobs = discovery.merge(
                cache_info=scrape.info, endpoint=server, flags=discovery.flag_knobs(16, None)
            )
            scrape = replace(scrape, knobs=knobs, server=server)
        monitor.feed(Frame(scrape.t, (scrape,)))
        history.append(list(monitor.endpoints[EP].findings))
    return history


def raises_max_num_seqs(findings: list[Finding]) -> bool:
    return any(
        r.knob == "max_num_seqs" and r.direction == "raise"
        for f in findings
        for r in f.recommendations
    )


@pytest.mark.parametrize("series", ["kv-exhausted-series", "frontend-bound-series"])
def test_real_kv_wall_gives_memory_ceiling_and_never_a_raise(series: str) -> None:
    history = replay(series)
    assert not any(raises_max_num_seqs(fs) for fs in history)
    final = {f.rule: f for f in history[-1]}
    assert final["memory-ceiling"].state == "firing", [
        (f.rule, f.state, f.summary) for f in history[-1]
    ]
    assert "budget-too-small" not in final or final["budget-too-small"].state != "firing"
    fb = final.get("frontend-bound")
    if series == "frontend-bound-series":
        assert fb is not None and fb.state == "firing"
        assert "client-static-batching" not in final or final["client-static-batching"].state != (
            "firing"
        )
    else:
        assert fb is None
    advice = {r.knob: r for r in final["memory-ceiling"].recommendations}
    assert advice["kv_cache_dtype"].new_value == "fp8"
    if "max_num_seqs" in advice:
        assert advice["max_num_seqs"].direction == "lower"
