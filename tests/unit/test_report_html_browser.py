"""The HTML report in a real browser at a phone's, a laptop's and a wide monitor's width.

Issue 29: below ~1240 px the report scrolled sideways (a fixed 1212-px timeline), each chart
filled half its card, and nothing said what the shading or the dashed lines meant. Headless
Chromium (`tests.chromium`, one browser per test process, reused across pages) opens each
report at 390, 1024 and 1600 px and measures what a reader meets:

- the page never scrolls sideways (`scrollWidth <= innerWidth`) and nothing reaches past the
  window's right edge, for the report of every shipped trace, of a demo, of a live server whose
  model names are hostile and 200 characters long, and of a document whose URLs, paths, flags,
  rule names and knob values are long unbreakable strings;
- every chart takes at least 90 % of its card, its text stays at its size (never scaled down
  with the card), and the legends are there and visible;
- a full-page screenshot at each width is a drawn page (kept in the temp folder for a human).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import Browser
from tests.fakerules import kv_full
from tests.hardening.test_page_faults import MODEL, PAGES, serve
from tests.pageserver import PageServer, Script
from tests.unit.test_hostile_strings import document as hostile_document
from vtop.cli.shipped_traces import shipped
from vtop.report import render
from vtop.report.document import Document
from vtop.report.run import live_document, replay_document, simulated_document
from vtop.sources.live import LiveSource
from vtop.sources.sim import SimSource
from vtop.sources.vllm import ScrapeOptions

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
WIDTHS = (390, 1024, 1600)
HEIGHT = 900
LONG_MODEL = "<script>" + "L" * 10_000

OVERFLOW = """(() => {
  const right = window.innerWidth + 0.5;
  const past = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > right)
    .map(e => e.tagName.toLowerCase() + ' ' + (e.textContent || '').slice(0, 40));
  return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, past};
})()"""
"""How wide the page is against the window, and what reaches past the window's right edge."""

CHARTS = """[...document.querySelectorAll('figure.chart')].map(card => {
  const style = getComputedStyle(card);
  const content = card.clientWidth - parseFloat(style.paddingLeft)
    - parseFloat(style.paddingRight);
  const drawn = card.querySelector('svg.plot, .lanes');
  const texts = [...card.querySelectorAll('svg.plot text')].map(
    t => t.getBoundingClientRect().height);
  return {name: card.querySelector('figcaption').textContent, content,
          width: drawn.getBoundingClientRect().width, card: card.getBoundingClientRect().width,
          smallest_text: texts.length ? Math.min(...texts) : null};
})"""
"""Each chart's card: its content width, the drawing's width, and its smallest SVG text."""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(tmp_path_factory.mktemp("chromium"), width=WIDTHS[0], height=HEIGHT) as b:
        yield b


def show(browser: Browser, page: Path, width: int) -> None:
    browser.resize(width, HEIGHT)
    browser.open(page.as_uri())


def assert_fits(browser: Browser, html: str, folder: Path, what: str) -> None:
    """At every width: no sideways scroll, nothing past the window's right edge."""
    page = folder / f"{what}.html"
    page.write_text(html, encoding="utf-8")
    for width in WIDTHS:
        show(browser, page, width)
        found: dict[str, Any] = browser.evaluate(OVERFLOW)
        assert found["inner"] == width, found
        assert found["scroll"] <= found["inner"], (what, width, found)
        assert not found["past"], (what, width, found["past"][:5])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(shipped()))
def test_no_shipped_trace_report_scrolls_sideways(
    browser: Browser, tmp_path: Path, name: str
) -> None:
    html = render(replay_document(str(shipped()[name])), "html")
    assert_fits(browser, html, tmp_path, name)


def test_a_demo_report_does_not_scroll_sideways(browser: Browser, tmp_path: Path) -> None:
    source = SimSource.scenario("memory-ceiling", seed=0, interval_s=1.0)
    html = render(simulated_document(source, name="memory-ceiling", duration_s=60.0), "html")
    assert "KV cache usage" in html
    assert_fits(browser, html, tmp_path, "demo")


def long_named_server() -> Script:
    """A real vLLM's pages whose model is named with markup and 10,000 `L`s."""
    pages = [p.replace(f'model_name="{MODEL}"', f'model_name="{LONG_MODEL}"') for p in PAGES]
    models = {"object": "list", "data": [{"id": LONG_MODEL, "max_model_len": 2048}]}
    return serve(pages, json.dumps(models).encode())


def test_a_live_report_of_a_hostile_server_does_not_scroll_sideways(
    browser: Browser, tmp_path: Path
) -> None:
    """The model's name, from the server, is cut to 200 characters: none of them a space."""

    async def watch(url: str) -> str:
        source = LiveSource([url], ScrapeOptions.from_env(interval_s=0.25, environ={}))
        try:
            doc = await live_document(source, name=url, interval_s=0.25, duration_s=1.0)
        finally:
            await source.aclose()
        return render(doc, "html")

    with PageServer(long_named_server()) as srv:
        html = asyncio.run(watch(srv.url))
    assert "&lt;script&gt;" + "L" * 150 in html
    assert_fits(browser, html, tmp_path, "live")


def long_strings_document() -> Document:
    """The hostile golden document with every string a reader cannot break at a space made
    long: the URL, the trace's path, the model, a rule's name, a flag, a knob, an event."""
    doc = hostile_document()
    url = "http://" + "a-very-long-host-name-" * 8 + "example:8000/" + "p" * 120
    model = "M" * 200
    endpoint = doc["endpoints"][0]
    endpoint["url"] = url
    endpoint["server"]["models"] = [model]
    endpoint["knobs"]["k_" * 75] = {"value": model, "provenance": "metrics", "detail": model}
    doc["source"]["name"] = "/" + "folder/" * 30 + model + ".vtrace"
    doc["gpus"][0]["name"] = model
    doc["events"] = [
        {
            "t": 0.0,
            "time": doc["window"]["from"] or "",
            "kind": "restart",
            "endpoint": url,
            "message": model,
        }
    ]
    for f in doc["findings"]:
        f["rule"], f["endpoint"] = "r" * 120, url
        f["evidence"].append({"name": "n" * 150, "value": model})
        for r in f["recommendations"]:
            r["flag"] = "--" + "f" * 150 + " " + "9" * 80
    return doc


def test_long_unbreakable_strings_wrap_inside_their_boxes(browser: Browser, tmp_path: Path) -> None:
    html = render(long_strings_document(), "html")
    assert "M" * 200 in html and "f" * 150 in html
    assert_fits(browser, html, tmp_path, "long-strings")


def golden_report() -> str:
    """A replay with a CRITICAL finding firing: shading, the KV chart's dashed lines, a bar."""
    return render(replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full), "html")


def test_charts_fill_their_cards_and_stay_legible(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(golden_report(), encoding="utf-8")
    for width in WIDTHS:
        show(browser, page, width)
        cards: list[dict[str, Any]] = browser.evaluate(CHARTS)
        assert len(cards) == 7, cards  # six signals and the findings timeline
        for card in cards:
            assert card["width"] >= 0.9 * card["content"], (width, card)
            if card["smallest_text"] is not None:  # 11-px labels, never scaled with the card
                assert card["smallest_text"] >= 10, (width, card)
        body = browser.evaluate("document.body.clientWidth - 24")
        if width == 390:  # one column: each card as wide as the page's text
            assert all(card["card"] >= body - 1 for card in cards), (body, cards)
        else:  # two columns, each at least 400 px
            assert all(card["card"] >= 400 for card in cards), cards


def test_every_encoding_has_a_legend_a_reader_can_see(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(golden_report(), encoding="utf-8")
    show(browser, page, 390)
    keys: list[dict[str, Any]] = browser.evaluate(
        "[...document.querySelectorAll('ul.key')].map(k => ({text: k.innerText,"
        " height: k.getBoundingClientRect().height,"
        " swatches: [...k.querySelectorAll('.k')].map(s => s.getBoundingClientRect().width)}))"
    )
    text = "\n".join(k["text"] for k in keys)
    assert "line: the signal, one point every" in text  # the line
    assert "red band: while kv-cache-full (CRITICAL) fired" in text  # the shading, named
    assert "90 % full" in text and "98 % full" in text  # the KV chart's dashed lines
    assert "red: a CRITICAL finding" in text  # the timeline's bar
    for key in keys:
        assert key["height"] > 10 and all(w >= 10 for w in key["swatches"]), key


def _png_size_and_variety(data: bytes) -> tuple[int, int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    return width, height, len(set(raw[:2_000_000]))


def test_chromium_screenshots_the_report_at_each_width(browser: Browser, tmp_path: Path) -> None:
    """The whole page at 390, 1024 and 1600 px, kept as vtop-report-WIDTH.png in the temp
    folder for a human to look at after the run."""
    page = tmp_path / "report.html"
    page.write_text(golden_report(), encoding="utf-8")
    for width in WIDTHS:
        show(browser, page, width)
        shot = browser.screenshot(tmp_path / f"report-{width}.png", full_page=True)
        shot_width, shot_height, variety = _png_size_and_variety(shot.read_bytes())
        assert shot_width == width and shot_height >= HEIGHT, (width, shot_height)
        assert variety > 40  # a drawn page, not a blank one
        shutil.copyfile(shot, Path(tempfile.gettempdir()) / f"vtop-report-{width}.png")
