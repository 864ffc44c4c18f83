"""Evidence never shows 0 for what was not read (issue 18): unknown is '–' everywhere.

frontend-bound's "API server process CPU" comes from the page's `process_cpu_seconds_total`. A vLLM
whose API server runs in Prometheus multiprocess mode (several API servers) writes no
`process_*` series at all: the real frontend-bound series (vLLM 0.32, the starved API server)
with them left out is that page. The row must read '–' in the finding detail (the TUI's) and in
every report format, never `0.00 cores`.

The simulator published its own process's CPU there (a few hundredths of a core, "0.00 cores"
beside a starved front end); its page now says the modelled API server's CPU seconds.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from tests.rules.test_triage_on_real_pages import EP, looped
from vtop.model import EndpointInfo, Frame
from vtop.report import render
from vtop.report.collect import Collector
from vtop.signals.extract import PageReader
from vtop.sim.twin import Twin
from vtop.sources import discovery
from vtop.ui.views import detail

ROW = "API server process CPU"
PROCESS = {"api_cpu_seconds", "api_start_time"}


def test_an_unread_api_server_cpu_is_a_dash_in_the_detail_and_every_report_format() -> None:
    collector = Collector(source_kind="live", source_name=EP)
    server = EndpointInfo(version="0.32.0", models=("vtop/engine",), max_model_len=2048)
    for i, scrape in enumerate(looped("frontend-bound-series", 240.0)):
        scalars = {k: v for k, v in scrape.scalars.items() if k.signal not in PROCESS}
        scrape = replace(scrape, scalars=scalars)
        if i == 0:
            knobs = discovery.merge(
                cache_info=scrape.info, endpoint=server, flags=discovery.flag_knobs(16, None)
            )
            scrape = replace(scrape, knobs=knobs, server=server)
        collector.add(Frame(scrape.t, (scrape,)))
    (finding,) = [f for f in collector.monitor.endpoints[EP].findings if f.rule == "frontend-bound"]
    assert finding.state == "firing"
    assert dict(finding.evidence)[ROW] == "–"
    assert f"{ROW}  –" in re.sub(r" {2,}", "  ", "\n".join(detail.lines(finding)))

    doc = collector.document()
    (fb,) = [f for f in doc["findings"] if f["rule"] == "frontend-bound"]
    assert {e["name"]: e["value"] for e in fb["evidence"]}[ROW] == "–"
    assert f'"{ROW}", "value": "–"' in json.dumps(doc, ensure_ascii=False)
    text = " ".join(render(doc, "text").split())
    assert re.search(f"{ROW}: –(;| |$)", text), text
    assert f"  - {ROW}: –\n" in render(doc, "markdown")
    assert f"<dt>{ROW}</dt><dd>–</dd>" in render(doc, "html")
    for fmt in ("text", "markdown", "html"):
        assert "0.00 cores" not in render(doc, fmt)


def test_the_simulator_publishes_the_modelled_api_servers_cpu() -> None:
    """The twin's starved front end is busy all the time: its page says about one core."""
    twin = Twin("frontend-bound")
    twin.warm_up()
    reader = PageReader()
    t0 = twin.engine.fe.busy_total
    a = reader.read(twin.metrics_text().decode(), endpoint="sim", t=0.0)
    twin.advance(20.0)
    b = reader.read(twin.metrics_text().decode(), endpoint="sim", t=20.0)
    cpu = [k for k in a.scalars if k.signal == "api_cpu_seconds"]
    assert cpu, "the page carries process_cpu_seconds_total"
    assert a.scalars[cpu[0]] == t0 and b.scalars[cpu[0]] == twin.engine.fe.busy_total
    assert 0.8 <= (b.scalars[cpu[0]] - a.scalars[cpu[0]]) / 20.0 <= 1.0
