"""Issue 26, point 1 and the Markdown of point 11, case by case: where outside text comes in.

Each case the issue quotes, at the door it came through, with a real server on loopback for
the network ones: the reason phrase of a scrape's answer (`HTTP/1.1 503 ESC]52;c;…BEL
ESC[2J`), Prometheus's `errorType`, `error` and `resultType` and the Content-Type of an answer
that is not JSON, rule titles and summaries, and U+202E, which every output kept. Then the
nets on the way out: a line on stderr, a document on stdout, a report in each format, and
Markdown that a server's words cannot make live. The whole journey, every output at once, is
`tests/hardening/test_hostile_text.py`.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.pageserver import Answer, PageServer, Script
from tests.tracegen import busy_frames
from vtop.cli.output import say, write_stdout
from vtop.report import render
from vtop.report.document import Document
from vtop.report.text import _code, _md
from vtop.sources.cmdline import parse_vllm_argv
from vtop.sources.host import VllmProcess
from vtop.sources.prometheus.client import PrometheusClient, PrometheusError
from vtop.sources.targets import describe
from vtop.sources.vllm import ScrapeOptions, VllmScraper
from vtop.trace.reader import TraceReader
from vtop.trace.recorder import Recorder
from vtop.triage.loader import RuleError, load_text

OSC52 = "\x1b]52;c;SGVsbG8=\x07"
CLEAR = "\x1b[2J"
RLO = "\u202e"
HOSTILE = f"{OSC52}{CLEAR}\x9b31m\x07{RLO}evil\u202c"
INERT = "]52;c;SGVsbG8=[2J31mevil"
"""`HOSTILE` as it may be shown: its text, no control or bidi character left."""


def raw(status_line: str, headers: bytes = b"", body: bytes = b"") -> Answer:
    return Answer(raw=status_line.encode() + b"\r\n" + headers
                  + b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))  # fmt: skip


# -- the scraper --------------------------------------------------------------------------------


def scrape(answer: Answer) -> str | None:
    async def go() -> str | None:
        with PageServer(Script({"/metrics": answer})) as srv:
            async with VllmScraper(srv.url, ScrapeOptions(timeout_s=2.0)) as s:
                return (await s.scrape()).error

    return asyncio.run(go())


def test_a_hostile_reason_phrase_is_shown_inert() -> None:
    """The case of the issue, byte for byte: the reason was printed raw."""
    error = scrape(raw(f"HTTP/1.1 503 {OSC52}{CLEAR}"))
    assert error is not None and error.startswith("HTTP 503 ]52;c;SGVsbG8=[2J from http://")
    assert error.isprintable()


def test_a_reason_phrase_is_cut_and_one_of_controls_only_says_error() -> None:
    error = scrape(raw("HTTP/1.1 500 " + "x" * 5000))
    assert error is not None and "x" * 99 + "…" in error and "x" * 100 not in error
    error = scrape(raw("HTTP/1.1 500 \x1b\x07"))
    assert error is not None and re.fullmatch(r"HTTP 500 error from http://[0-9.:]+/metrics", error)


# -- Prometheus -------------------------------------------------------------------------------


def prometheus_error(answer: Answer, kind: str = "vector") -> str:
    async def go() -> str:
        with PageServer(Script({"/api/v1/query": answer})) as srv:
            client = PrometheusClient(srv.url)
            try:
                await client.query("up")
            except PrometheusError as exc:
                return str(exc)
            finally:
                await client.aclose()
        raise AssertionError("no error")

    return asyncio.run(go())


def json_answer(doc: dict[str, Any], status: int = 200) -> Answer:
    return Answer(json.dumps(doc).encode(), status=status, content_type="application/json")


def test_a_hostile_error_type_and_error_are_shown_inert() -> None:
    doc = {"status": "error", "errorType": HOSTILE, "error": f"{HOSTILE}\n\ud800 line two"}
    message = prometheus_error(json_answer(doc, 422))
    assert message.endswith(f"refused the query: {INERT}: {INERT} line two")
    assert message.isprintable()
    message.encode("utf-8")  # the lone surrogate is gone: printing it cannot fail


def test_a_hostile_result_type_is_shown_inert() -> None:
    doc = {"status": "success", "data": {"resultType": HOSTILE, "result": []}}
    message = prometheus_error(json_answer(doc))
    assert message.endswith(f"expected a vector result, got {INERT}")


def test_a_hostile_content_type_is_shown_inert() -> None:
    header = b"Content-Type: text/html" + HOSTILE.encode() + b"\r\n"
    message = prometheus_error(raw("HTTP/1.1 200 OK", header, b"<html>"))
    assert f"answered HTTP 200 (text/html{INERT}), not JSON" in message
    assert message.isprintable()


def test_the_error_line_itself_is_clean_whatever_goes_in() -> None:
    assert str(PrometheusError(f"a {HOSTILE}\nb")) == f"a {INERT} b"


# -- rule files -------------------------------------------------------------------------------


def yaml_text(text: str) -> str:
    return json.dumps(text)  # JSON's escapes are YAML's, in a double-quoted scalar


RULE = f"""\
id: hostile
title: {yaml_text("Title " + HOSTILE)}
severity: warning
when: {{max_over_time: running, window: 1m, above: 0}}
description: {yaml_text(HOSTILE + chr(10) + "second line")}
source: {yaml_text(HOSTILE)}
values:
  most: {{max_over_time: running, window: 1m, label: {yaml_text(HOSTILE)}}}
summary: {yaml_text("Summary " + HOSTILE + " {most:.0f}")}
evidence:
  {yaml_text("Row " + HOSTILE)}: {yaml_text("{most:.0f} " + HOSTILE)}
recommend:
  - knob: max_num_seqs
    direction: lower
    value: "8"
    tradeoff: {yaml_text(HOSTILE)}
"""


def test_a_rule_file_says_nothing_a_terminal_obeys() -> None:
    loaded = load_text(RULE, "hostile.yaml")
    assert not loaded.errors, loaded.errors
    rule = loaded.rules["hostile"]
    assert rule.title == f"Title {INERT}"
    assert rule.summary == f"Summary {INERT} {{most:.0f}}"
    assert rule.description == f"{INERT}\nsecond line"  # lines kept, controls gone
    assert rule.source == INERT
    assert rule.evidence == ((f"Row {INERT}", f"{{most:.0f}} {INERT}"),)
    assert rule.values[0].label == INERT
    assert rule.recommend[0].tradeoff == INERT


def test_a_rule_error_is_one_clean_line_whatever_the_file_is_called() -> None:
    error = RuleError(f"rules/{OSC52}{RLO}x.yaml", 3, "r", f"unknown key {HOSTILE}\nmore")
    assert str(error) == f"rules/]52;c;SGVsbG8=x.yaml:3: r: unknown key {INERT} more"


def test_a_rule_id_with_a_trailing_newline_is_refused() -> None:
    loaded = load_text('id: "ok-id\\n"\ntitle: t\nseverity: info\nwhen: {last: running, '
                       'above: 0}\nsummary: s\n', "r.yaml")  # fmt: skip
    assert not loaded.rules
    assert "id must be lower-case words" in str(loaded.errors[0])


# -- local processes and trace files ----------------------------------------------------------


def test_a_command_line_knob_and_the_discover_line_are_inert() -> None:
    argv = ["vllm", "serve", "m", "--kv-cache-dtype", HOSTILE, "--config", f"/tmp/{OSC52}.yaml"]
    knobs = parse_vllm_argv(argv, pid=7)
    assert knobs["kv_cache_dtype"].value == INERT
    proc = VllmProcess(pid=7, pids=(7,), argv=tuple(argv), port=8000, matched_by="socket")
    line = describe(proc)
    assert line.isprintable() and INERT in line


def test_a_trace_named_by_a_stranger_is_shown_inert(tmp_path: Path) -> None:
    path = tmp_path / f"trace {OSC52}{RLO}.vtrace"
    rec = Recorder(path, sources=["x"], interval_s=1.0)
    for frame in busy_frames(2):
        rec.feed(frame)
    rec.close()
    with TraceReader(path) as reader:
        assert reader.name == "trace ]52;c;SGVsbG8=.vtrace"


# -- the nets on the way out ----------------------------------------------------------------


def test_a_line_on_stderr_is_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    say(f"HTTP 503 {HOSTILE}\nsecond")
    assert capsys.readouterr().err == f"vtop: HTTP 503 {INERT} second\n"


def test_a_document_on_stdout_keeps_its_lines_and_loses_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_stdout(f"a {HOSTILE}\r\n\tb ▇█\n")
    assert capsys.readouterr().out == f"a {INERT}\n\tb ▇█\n"


def document() -> Document:
    """The golden replay's document, with the server's words hostile where a server says them."""
    from tests.unit.test_report_golden import document as golden

    doc = golden("kv-pressure", True)
    words = (
        f"{HOSTILE} ![img](http://evil.example/i.png) **loud** [l](http://evil.example) "
        "<img src=x> &#8238; a|b `code` _em_ ~~del~~ www.evil.example x@evil.example $x$"
    )
    ep = doc["endpoints"][0]
    ep["server"]["models"] = [words]
    ep["server"]["version"] = words
    ep["error"] = words
    for knob in ep["knobs"].values():
        knob["detail"] = words
    ep["knobs"][f"name `{words}`"] = {"value": words, "provenance": "metrics", "detail": "-"}
    for f in doc["findings"]:
        f["summary"] = words
        f["evidence"] = [{"name": "- " + words, "value": words}, {"name": "1. x", "value": "y"}]
    doc["gpus"][0]["name"] = words
    doc["reason"] = "# " + words
    doc["source"]["name"] = words
    return doc


def test_no_format_of_the_report_keeps_a_control_or_bidi_character() -> None:
    doc = document()
    for fmt in ("text", "markdown", "html", "json"):
        out = render(doc, fmt)
        bad = sorted({c for c in out if not c.isprintable() and c != "\n"})
        assert not bad, (fmt, bad)
        assert "SGVsbG8=" in out, fmt
    decoded = json.dumps(json.loads(render(doc, "json")), ensure_ascii=True)
    assert "\\u202e" not in decoded and "\\u001b" not in decoded


def test_server_words_never_become_live_markdown() -> None:
    md = render(document(), "markdown")
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)
    assert "<img" not in html and "<a " not in html  # no image, no link
    assert "<em>" not in html and "<del>" not in html and "<h1>" not in html
    assert set(re.findall(r"<strong>(.*?)</strong>", html)) == {"CRITICAL"}  # the report's own
    assert "&#8238;" not in html.replace("&amp;#8238;", "")  # an entity shown, not decoded
    prose = re.sub(r"(`+).*?\1", "", md)  # code spans are never autolinked
    assert "http://evil" not in prose and "www.evil" not in prose and "x@evil" not in prose
    findings = html.split("<h3>Findings</h3>")[1]
    assert "<ol" not in findings and findings.count("<ul>") == 2  # no list from "- " or "1. "
    header: int | None = None
    for line in md.split("\n"):  # every table row as many cells as its header
        cells = len(re.findall(r"(?<!\\)\|", line)) if line.startswith("|") else None
        header = cells if header is None or cells is None else header
        assert cells is None or cells == header, line


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("![img](http://e.x/i.png)", "!\\[img\\](http\\://e.x/i.png)"),
        ("**loud** _em_ snake_case_name", "\\*\\*loud\\*\\* \\_em\\_ snake_case_name"),
        (
            "a|b <img> &#8238; `c` ~~d~~ $x$",
            "a\\|b &lt;img> \\&\\#8238; \\`c\\` \\~\\~d\\~\\~ \\$x\\$",
        ),
        ("www.e.x mail@e.x", "www\\.e.x mail\\@e.x"),
        (
            "vllm:cache_config_info 48.1% --max-num-seqs",
            "vllm:cache_config_info 48.1% --max-num-seqs",
        ),
    ],
)
def test_md_escapes_what_markdown_reads(text: str, escaped: str) -> None:
    assert _md(text) == escaped


def test_md_escapes_a_block_marker_where_a_line_starts() -> None:
    assert _md("- item", starts_line=True) == "\\- item"
    assert _md("12. item", starts_line=True) == "12\\. item"
    assert _md("> quote", starts_line=True) == "\\> quote"
    assert _md("- item") == "- item"  # inside a line it is text


def test_a_code_span_cannot_be_closed_from_inside() -> None:
    assert _code("a`b") == "``a`b``"
    assert _code("`x`") == "`` `x` ``"
    assert _code("a|b") == "`a\\|b`" and _code("a|b", in_table=False) == "`a|b`"
    html = MarkdownIt("commonmark").render(f"- {_code('x `` ![i](u) y', in_table=False)}")
    assert "<img" not in html and "<code>x `` ![i](u) y</code>" in html
