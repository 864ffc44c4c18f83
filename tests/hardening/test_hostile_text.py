"""One hostile string, through every door vtop has to the outside and out of every output.

Issue 26, point 1: a server's reason phrase (`HTTP/1.1 503 ESC]52;c;…BEL ESC[2J`) reached the
dashboard, the text report and stderr raw, writing the user's clipboard; Prometheus's
`errorType`, `error`, `resultType` and the Content-Type went through the same way, so did rule
titles and summaries, and a right-to-left override (U+202E) was kept in every output. Point 11:
Markdown reports left `![img](http://…)` and `**…**` from server strings live.

`HOSTILE` carries all of it: OSC 52, CSI 2J, the 8-bit CSI, BEL, U+202E, Textual markup,
Markdown (image, bold, link, a table pipe) and an HTML tag. It comes in through real parts:

- a vLLM stand-in on loopback (a real HTTP server) whose real-format /metrics page, captured
  from vLLM 0.32, names its model `HOSTILE`, and says so in /v1/models and /version;
- a second one answering every request `HTTP/1.1 503 <hostile reason>`;
- Prometheus stand-ins (real HTTP servers speaking its API): one refusing the query with a
  hostile `errorType` and `error` (a lone surrogate included), one answering a hostile
  `resultType`, one answering non-JSON with a hostile Content-Type;
- a rule file whose title, summary, description, value label and evidence row say it (as
  YAML escapes), beside a broken rule file whose very name is hostile;
- a trace, recorded by vtop's own recorder and named with it, whose models, version, knobs,
  errors, events and GPU name say it.

And it must come out inert from every output: the dashboard and the replay screen (what
Textual writes to the terminal, under Pilot), the text, Markdown, HTML and JSON reports,
`--once`, `vtop trace info`, and stderr. Inert means: no control character (C0, C1, DEL; a
newline alone allowed in documents), no format character (bidi overrides and isolates,
zero-width characters), no separator, no lone surrogate, beyond the sequences Textual itself
writes to draw; markup shown as text; in Markdown, rendered by markdown-it (the CommonMark
parser Textual ships with), no image, link, emphasis, strikethrough or HTML tag from the
string, no bare autolink, and every table row as many cells as its header. Each output must
also show the string's words (`SHOWN`), so a test that found nothing because nothing arrived
fails too.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.hardening.conftest import SERIES
from tests.pageserver import Answer, PageServer, Script
from tests.tracegen import busy_frames
from vtop.model import EndpointInfo, Event, Frame, GpuReading, GpuStatus, Knob
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.vllm import ScrapeOptions
from vtop.trace.recorder import Recorder
from vtop.triage.engine import Engine

HOSTILE = (
    "\x1b]52;c;SGVsbG8=\x07"  # OSC 52: write "Hello" to the clipboard
    "\x1b[2J"  # CSI 2J: clear the screen
    "\x9b31m"  # the 8-bit CSI: red
    "\x07"  # BEL
    "\u202eevil\u202c"  # right-to-left override, pop
    " [bold red]x[/]"  # Textual markup
    " ![img](http://evil.example/i.png)"  # a Markdown image: loaded where it is pasted
    " **loud**"  # Markdown emphasis
    " [link](http://evil.example/)"  # a Markdown link
    " <img src=x onerror=alert(1)>"  # HTML
    " a|b"  # a table cell's end
)
REASON = "\x1b]52;c;SGVsbG8=\x07\x1b[2J [bold red]x[/] **loud** ![img](http://evil.example/i.png)"
"""What an HTTP reason phrase can carry: ASCII only (httpx drops the rest), controls included."""
SHOWN = "SGVsbG8="
"""The OSC's payload: what is left to read of the string once its controls are gone."""
UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
TEXTUAL_SEQUENCE = re.compile(r"\x1b\[[0-9;]*[mH]")
"""What Textual writes to draw a screen: colours (SGR) and cursor positions."""
STATUS_WORDS = {"OK", "INFO", "WARNING", "CRITICAL", "UNKNOWN"}
"""What a report itself writes in bold (the verdict, a finding's severity)."""


def unsafe(text: str, allowed: str = "\n") -> list[str]:
    return sorted({c for c in text if unicodedata.category(c) in UNSAFE and c not in allowed})


def assert_inert(text: str, what: str, *, allowed: str = "\n") -> None:
    bad = unsafe(text, allowed)
    assert not bad, f"{what}: characters {bad!r} got through"


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def assert_json_inert(out: str, what: str) -> None:
    assert_inert(out, what)
    found = list(strings(json.loads(out)))  # the escapes (\u001b, \u202e) decoded
    for s in found:
        assert_inert(s, f"{what} (a JSON string)", allowed="")
    assert any(SHOWN in s for s in found), f"{what}: the hostile string never arrived"


# -- Markdown, judged by a renderer -------------------------------------------------------------

RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def assert_markdown_inert(md: str, what: str) -> None:
    assert_inert(md, what)
    html = RENDERER.render(md)
    assert "<img" not in html, f"{what}: an image is live"
    assert "<a " not in html, f"{what}: a link is live"
    assert "<em>" not in html and "<del>" not in html, f"{what}: emphasis is live"
    bold = set(re.findall(r"<strong>(.*?)</strong>", html))
    assert bold <= STATUS_WORDS, f"{what}: bold from outside: {bold - STATUS_WORDS}"
    assert "<img src=x" not in html and "onerror" not in re.sub(r"&lt;img[^\n]*", "", html)
    assert "http://evil" not in md and "www.evil" not in md, f"{what}: a bare autolink"
    table: int | None = None
    for line in md.split("\n"):
        if line.startswith("|"):
            cells = len(UNESCAPED_PIPE.findall(line))
            table = cells if table is None else table
            assert cells == table, f"{what}: a row with {cells} cell ends, not {table}: {line}"
        else:
            table = None


def test_the_markdown_judge_can_fail() -> None:
    """The renderer sees what the escaping prevents: the string raw is live Markdown."""
    raw = f"| a | b |\n|---|---|\n| x | {HOSTILE[24:]} |\n"
    with pytest.raises(AssertionError):
        assert_markdown_inert(raw, "raw")
    html = RENDERER.render(raw)
    assert "<img" in html and "<a " in html and "<strong>loud</strong>" in html


# -- the doors ---------------------------------------------------------------------------------


def yaml_text(text: str) -> str:
    """`text` as a YAML double-quoted scalar (JSON's escapes are YAML's)."""
    return json.dumps(text)


def hostile_page(page: str) -> str:
    return page.replace('model_name="vtop/engine"', f'model_name="{HOSTILE}"')


def vllm_script() -> Script:
    pages = [hostile_page(p.read_text()).encode() for p in SERIES]
    polls = iter(range(10**9))
    models = {"object": "list", "data": [{"id": HOSTILE, "max_model_len": 2048}]}
    return Script({
        "/metrics": lambda: Answer(pages[min(next(polls), len(pages) - 1)]),
        "/version": Answer(json.dumps({"version": HOSTILE}).encode()),
        "/v1/models": Answer(json.dumps(models).encode()),
    })  # fmt: skip


def raw_answer(status_line: bytes, headers: bytes = b"", body: bytes = b"") -> Answer:
    return Answer(raw=b"%s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                  % (status_line, headers, len(body), body))  # fmt: skip


def failing_script() -> Script:
    answer = raw_answer(b"HTTP/1.1 503 " + REASON.encode())
    return Script({"/metrics": answer, "/version": answer, "/v1/models": answer})


def json_answer(doc: dict[str, Any], status: int = 200) -> Answer:
    return Answer(json.dumps(doc).encode(), status=status, content_type="application/json")


PROMETHEUS_ERROR = json.dumps({"status": "error", "errorType": HOSTILE,
                               "error": HOSTILE + "\ud800"})  # fmt: skip
"""A refusal; `\\ud800`, a lone surrogate, is valid JSON that no UTF-8 stream can print."""


def prometheus_scripts() -> dict[str, Script]:
    query = "/api/v1/query"
    not_json = raw_answer(b"HTTP/1.1 200 OK",
                          b"Content-Type: " + HOSTILE.encode() + b"\r\n", b"<html>")  # fmt: skip
    refused = Answer(PROMETHEUS_ERROR.encode(), status=422, content_type="application/json")
    odd_type = json_answer({"status": "success", "data": {"resultType": HOSTILE, "result": []}})
    return {
        "refused": Script({query: refused}),
        "result type": Script({query: odd_type}),
        "content type": Script({query: not_json}),
    }


RULE = f"""\
id: hostile-words
title: {yaml_text(HOSTILE)}
severity: warning
requires: {{evidence: 1s}}
when: {{max_over_time: running, window: 1m, above: -1}}
description: {yaml_text(HOSTILE + chr(10) + HOSTILE)}
source: {yaml_text(HOSTILE)}
values:
  most: {{max_over_time: running, window: 1m, label: {yaml_text(HOSTILE)}}}
summary: {yaml_text(HOSTILE + " {most:.0f}")}
evidence:
  {yaml_text(HOSTILE)}: {yaml_text("{most:.0f} " + HOSTILE)}
"""
BROKEN_RULE_NAME = "broken \x1b]52;c;SGVsbG8=\x07\u202e.yaml"


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "hostile.yaml").write_text(RULE, encoding="utf-8")
    (d / BROKEN_RULE_NAME).write_text("id: broken\ntitle: [unclosed\n", encoding="utf-8")
    return d


def hostile_frames(n: int = 60) -> list[Frame]:
    """A busy server's polls, everything it says of itself hostile; some polls fail."""
    out = []
    for i, frame in enumerate(busy_frames(n, seed=5)):
        (scrape,) = frame.scrapes
        scalars = {k._replace(model=HOSTILE) if k.model else k: v
                   for k, v in scrape.scalars.items()}  # fmt: skip
        histograms = {k._replace(model=HOSTILE) if k.model else k: v
                      for k, v in scrape.histograms.items()}  # fmt: skip
        scrape = replace(scrape, scalars=scalars, histograms=histograms,
                         info={**scrape.info, "cache_dtype": HOSTILE})  # fmt: skip
        if i == 0:
            scrape = replace(
                scrape,
                server=EndpointInfo(version=HOSTILE, models=(HOSTILE,), max_model_len=4096),
                knobs={**(scrape.knobs or {}),
                       "kv_cache_dtype": Knob("kv_cache_dtype", HOSTILE, "process", HOSTILE)},
            )  # fmt: skip
        events: tuple[Event, ...] = ()
        if i in (20, 21):
            scrape = replace(scrape, error=f"HTTP 503 {HOSTILE}", scalars={}, histograms={})
            events = (Event(scrape.t, "note", scrape.endpoint, HOSTILE),)
        gpu = GpuStatus(gpus=(GpuReading(index=0, name=HOSTILE, util_pct=50.0),))
        out.append(replace(frame, scrapes=(scrape,), gpu=gpu, events=events))
    return out


@pytest.fixture
def hostile_trace(tmp_path: Path) -> Path:
    path = tmp_path / "hostile \x1b]52;c;SGVsbG8=\x07\u202e.vtrace"
    rec = Recorder(path, sources=[HOSTILE], interval_s=1.0)
    for frame in hostile_frames():
        rec.feed(frame)
    rec.close()
    return path


# -- the outputs -------------------------------------------------------------------------------

FORMATS = ("text", "markdown", "html", "json")


def judge_report(fmt: str, out: str, what: str) -> None:
    if fmt == "json":
        assert_json_inert(out, what)
        return
    assert_inert(out, what)
    assert SHOWN in out, f"{what}: the hostile string never arrived"
    if fmt == "markdown":
        assert_markdown_inert(out, what)
    if fmt == "html":
        assert "<img src=x" not in out and "onerror=alert(1)>" not in out  # escaped, or cut
    if fmt == "text":
        assert "[bold red]x[/]" in out  # markup is text


def run_all(vtop_process: Callable[..., subprocess.Popen[str]],
            runs: dict[str, tuple[str, ...]]) -> dict[str, tuple[int, str, str]]:  # fmt: skip
    procs = {name: vtop_process(*args) for name, args in runs.items()}  # in parallel
    return {name: (p.wait(timeout=90), *p.communicate(timeout=30)) for name, p in procs.items()}


def test_live_servers_and_rules_are_inert_in_every_report_format_and_on_stderr(
    vtop_process: Callable[..., subprocess.Popen[str]], rules_dir: Path
) -> None:
    with PageServer(vllm_script()) as hostile, PageServer(failing_script()) as failing:
        live = ("--url", hostile.url, "--url", failing.url, "--rules", str(rules_dir),
                "--duration", "1.5", "--interval", "0.25", "--report")  # fmt: skip
        runs: dict[str, tuple[str, ...]] = {fmt: (*live, "--format", fmt) for fmt in FORMATS}
        runs["once"] = ("--url", hostile.url, "--url", failing.url, "--once")
        results = run_all(vtop_process, runs)
    for name, (code, out, err) in results.items():
        assert code in (0, 1, 2, 3), (name, code, err)
        assert_inert(err, f"{name}: stderr")
        if name == "once":
            assert_json_inert(out, "--once")
            continue
        judge_report(name, out, f"--report --format {name}")
        assert "hostile-words" in out, f"{name}: the hostile rule did not fire"
        # stderr: the verdict's line quotes the 503's reason; the broken rule names its file
        assert "]52;c;SGVsbG8=" in err and "broken ]52;c;SGVsbG8=.yaml" in err, err
    text = results["text"][1]
    assert "HTTP 503 ]52;c;SGVsbG8=[2J [bold red]x[/] **loud**" in text  # the reason, inert
    assert "evil" in text and "\u202e" not in text


def test_prometheus_answers_are_inert_in_every_report_format_and_on_stderr(
    vtop_process: Callable[..., subprocess.Popen[str]],
) -> None:
    scripts = prometheus_scripts()
    servers = {name: PageServer(script) for name, script in scripts.items()}
    for server in servers.values():
        server.__enter__()
    try:
        report = ("--duration", "0.5", "--report", "--format")
        runs = {(name, fmt): ("--prometheus", srv.url, *report, fmt)
                for name, srv in servers.items() for fmt in FORMATS}  # fmt: skip
        procs = {key: vtop_process(*args) for key, args in runs.items()}
        results = {key: (p.wait(timeout=90), *p.communicate(timeout=30))
                   for key, p in procs.items()}  # fmt: skip
    finally:
        for server in servers.values():
            server.stop()
    for (name, fmt), (code, out, err) in results.items():
        what = f"Prometheus {name}, --format {fmt}"
        assert code in (0, 1, 2, 3), (what, code, err)
        assert_inert(err, f"{what}: stderr")
        assert SHOWN in err or "evil" in err, f"{what}: stderr never quoted the answer: {err}"
        if out:
            judge_report(fmt, out, what)


def test_a_hostile_trace_is_inert_in_every_report_format_and_in_trace_info(
    vtop_process: Callable[..., subprocess.Popen[str]], hostile_trace: Path
) -> None:
    runs: dict[str, tuple[str, ...]] = {
        fmt: ("--replay", str(hostile_trace), "--report", "--format", fmt) for fmt in FORMATS
    }
    runs["info"] = ("trace", "info", str(hostile_trace))
    results = run_all(vtop_process, runs)
    for name, (code, out, err) in results.items():
        assert code in (0, 1, 2, 3), (name, code, err)
        assert_inert(err, f"trace {name}: stderr")
        if name == "info":
            assert_inert(out, "trace info")
            assert SHOWN in out and "hostile ]52;c;SGVsbG8=.vtrace" in out, out
            continue
        judge_report(name, out, f"trace, --format {name}")
        if name == "text":
            assert "hostile ]52;c;SGVsbG8=.vtrace" in out  # the file's name, inert


# -- the screens -------------------------------------------------------------------------------


def screen_text(app: Any, terminal: Callable[[Any], str]) -> tuple[str, list[str]]:
    raw = terminal(app)
    assert_inert(TEXTUAL_SEQUENCE.sub("", raw), "the screen", allowed="\n\r")
    return raw, TEXTUAL_SEQUENCE.sub("", raw).split("\n")


async def test_live_servers_and_rules_are_inert_on_the_dashboard(
    terminal: Callable[[Any], str], rules_dir: Path
) -> None:
    """The dashboard over both servers with the hostile rules, at 120×40: the header (the
    model, the version), the fleet rows (the 503's reason), the triage panel (the rule's
    title and summary), the rule-error toast (the broken file's name), the finding's screen
    (its evidence rows) and the engines screen."""
    from vtop.ui.app import VtopApp
    from vtop.ui.screens.engines import EnginesScreen
    from vtop.ui.screens.finding import FindingScreen

    engine = Engine.from_catalog([rules_dir], user=False)
    assert any(BROKEN_RULE_NAME in e.file for e in engine.errors)
    with PageServer(vllm_script()) as hostile, PageServer(failing_script()) as failing:
        source = LiveSource([hostile.url, failing.url], ScrapeOptions(timeout_s=2.0))
        monitor = Monitor(capacity=600, engine=engine)
        app = VtopApp(source, monitor, interval=0.2, self_cpu=lambda: 0.4)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            while monitor.frames < 6:
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            _, lines = screen_text(app, terminal)
            shown = "\n".join(lines)
            assert "]52;c;SGVsbG8=" in shown  # the model, the reason: their text, inert
            assert "broken ]52;c;SGVsbG8=.yaml" in shown  # the toast of the broken rule
            assert "[bold red]x[/]" in shown  # markup drawn as the text it is

            await pilot.press("2")  # the failing endpoint: the 503's reason in the triage panel
            await pilot.pause(0.3)
            _, lines = screen_text(app, terminal)
            assert "]52;c;SGVsbG8=[2J [bold red]x[/] **loud**" in "\n".join(lines)
            await pilot.press("1")

            findings = [f for f in monitor.engine.evaluate(monitor.endpoints[hostile.url])
                        if f.rule == "hostile-words"]  # fmt: skip
            assert findings, "the hostile rule did not fire"
            (finding,) = findings
            assert_inert(finding.title + finding.summary, "the finding", allowed="")
            assert all(not unsafe(k + v, "") for k, v in finding.evidence)
            app.push_screen(FindingScreen(finding, monitor.t, monitor=monitor))
            await pilot.pause(0.3)
            _, lines = screen_text(app, terminal)
            assert SHOWN in "\n".join(lines)
            await pilot.press("escape")
            await pilot.pause(0.1)

            await pilot.press("b")
            await pilot.pause(0.3)
            assert isinstance(app.screen, EnginesScreen)
            _, lines = screen_text(app, terminal)  # inert; one model: the header names it
            assert "one engine" in "\n".join(lines)  # (several: test_page_faults' models)
            await pilot.press("escape")
            await pilot.press("q")
    assert app.return_code == 0


async def test_a_hostile_trace_is_inert_on_the_replay_screen(
    terminal: Callable[[Any], str], hostile_trace: Path
) -> None:
    from vtop.sources.replay import ReplaySource
    from vtop.trace.reader import TraceReader
    from vtop.ui.replay_app import ReplayApp

    source = ReplaySource(TraceReader(hostile_trace), speed=100.0, playing=True)
    app = ReplayApp(source, Engine.from_catalog(user=False), self_cpu=lambda: 0.4)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if app.monitor.frames >= 30:
                break
        await pilot.pause(0.2)
        _, lines = screen_text(app, terminal)
        # the model, after its last "/", as the header names it (the version, too long to
        # show whole, is left out)
        assert "<img src=x onerror=alert(1)> a|b" in "\n".join(lines)
        await pilot.press("q")
    await asyncio.sleep(0)


def test_a_hostile_reason_phrase_and_rule_leave_a_real_terminal_alone(
    tmux_vtop: Callable[..., Any], rules_dir: Path
) -> None:
    """`vtop --url` in tmux, over both servers with the hostile rules: every byte vtop wrote is
    free of the string's sequences, the clipboard (tmux's buffers, `set-clipboard on`) and
    the title are untouched, and the reason's text is on the screen."""
    from tests.hardening.test_page_faults import TEXTUAL_TERMINAL

    with PageServer(vllm_script()) as hostile, PageServer(failing_script()) as failing:
        pane = tmux_vtop("--url", hostile.url, "--url", failing.url, "--rules", str(rules_dir),
                         "--interval", "0.3", size=(120, 40))  # fmt: skip
        title = pane.show("#{pane_title}")
        deadline = time.monotonic() + 20
        while "hostile-words" not in pane.screen():
            assert time.monotonic() < deadline, pane.screen()
            time.sleep(0.1)
        pane.keys("2")  # the failing endpoint: its reason in the triage panel
        deadline = time.monotonic() + 10
        while "]52;c;SGVsbG8=[2J [bold red]x[/]" not in pane.screen():
            assert time.monotonic() < deadline, pane.screen()
            time.sleep(0.1)
        pane.keys("q")
        status = pane.wait_exit()
        written = pane.written().decode("utf-8", errors="replace")
    assert status == 0
    assert_inert(TEXTUAL_TERMINAL.sub("", written), "tmux", allowed="\n\r")
    assert pane.tmux("list-buffers") == ""  # no OSC 52 reached the clipboard
    assert pane.show("#{pane_title}") == title
