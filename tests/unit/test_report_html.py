"""The HTML report: one self-contained file, well-formed, escaped, with a key to its charts.

The file must not ask for anything outside itself (no script, no fetch), so it opens from a
mail or a ticket years later. How a real browser draws it at a phone's, a laptop's and a wide
monitor's width is `test_report_html_browser.py`.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

from tests.fakerules import kv_full
from vtop.report import render
from vtop.report.run import replay_document

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def html_report() -> str:
    return render(replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full), "html")


class _Tags(HTMLParser):
    VOID: ClassVar[set[str]] = {"meta", "br", "wbr", "line", "rect", "circle", "path"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, (self.stack[-3:], tag)
        self.stack.pop()


def test_html_is_self_contained_and_well_formed() -> None:
    html = html_report()
    tags = _Tags()
    tags.feed(html)
    assert tags.stack == []
    assert html.count('<svg class="plot"') == 6  # six signal charts, each its own width
    assert html.count('class="chart timeline"') == 1  # and the findings on a timeline
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", html)
    assert "<script" not in html and "@import" not in html and "url(" not in html
    assert "--gpu-memory-utilization 0.95" in html and "CRITICAL" in html


def test_strings_from_a_trace_are_escaped() -> None:
    doc = replay_document(str(GOLDEN / "busy.vtrace"))
    doc["endpoints"][0]["url"] = "<img src=x onerror=alert(1)>"
    doc["reason"] = "</p><script>alert(1)</script>"
    html = render(doc, "html")
    assert "<script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html


def test_a_rule_and_a_knob_from_outside_are_escaped_in_the_keys_and_the_timeline() -> None:
    doc = replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full)
    doc["findings"][0]["rule"] = "<b>rule</b>&amp;"
    doc["findings"][0]["summary"] = '" onmouseover="alert(1)'
    doc["endpoints"][0]["knobs"]["<i>knob_name</i>"] = doc["endpoints"][0]["knobs"]["block_size"]
    html = render(doc, "html")
    assert "<b>rule" not in html and "<i>" not in html and '" onmouseover' not in html
    assert "while &lt;b&gt;rule&lt;/b&gt;&amp;amp; (CRITICAL) fired" in html  # the chart key
    assert "<code>&lt;b&gt;rule&lt;/b&gt;&amp;amp;</code> CRITICAL" in html  # the timeline
    assert "&lt;i&gt;knob_<wbr>name&lt;/i&gt;" in html  # breakable after `_`, still escaped


def test_the_keys_name_what_each_chart_draws_and_only_that() -> None:
    html = html_report()  # a CRITICAL finding firing: a red band on every chart and a red bar
    assert "line: the signal, one point every" in html
    assert "red band: while kv-cache-full (CRITICAL) fired" in html
    assert "90 % full: vLLM&#x27;s dashboard turns orange" in html and "98 % full" in html
    assert "red: a CRITICAL finding" in html
    assert "amber" not in html and "pale:" not in html and "grey:" not in html
    quiet = render(replay_document(str(GOLDEN / "busy.vtrace"), findings=lambda _: []), "html")
    assert "line: the signal" in quiet and "band:" not in quiet  # nothing fired: no band
    assert 'class="chart timeline"' not in quiet and "<p>None.</p>" in quiet
