"""The page lies or attacks: bad numbers stay out of the figures, hostile labels stay inert.

Issue 8 ("Hardening"): a server (or a proxy, or an exporter in between) can put anything on its
page. Numbers: NaN, ±Inf, negative gauges, a counter that goes backwards, the same series twice,
a histogram without its `+Inf` bucket or with buckets that decrease. Labels: a `model_name`
carrying ANSI escape sequences (colours, screen clears, cursor moves, OSC 52 that writes the
user's clipboard, OSC 2 that renames the terminal, their 8-bit C1 forms), Rich/Textual markup
(`[@click=app.quit]` is a link that quits), HTML, and 10,000 characters. vLLM repeats the model
name in /v1/models, so the hostile server here says the same things there and in /version.

Every page is a page captured from a real vLLM 0.32 server with the fault edited in, served by a
real HTTP server on loopback, read by the real path (`LiveSource` + `Monitor` + store, the
command line, the dashboard). What reaches a terminal is judged on the bytes: Textual's output
under Pilot, and every byte vtop wrote to a real terminal (tmux) for the same server.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable
from itertools import count
from pathlib import Path
from typing import Any

from rich.cells import cell_len

from tests.hardening.localfaults import judged
from tests.pageserver import Answer, PageServer, Script
from vtop.model import SeriesKey
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.vllm import ScrapeOptions

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-0.32"
PAGES = [p.read_text() for p in sorted((REAL / "kv-exhausted-series").glob("[0-9][0-9].txt"))]
"""Ten consecutive pages of a real server under KV pressure, every counter rising."""
MODEL = "vtop/engine"
RUNNING = [8.0, 9.0, 8.0, 13.0, 14.0, 11.0, 10.0, 10.0, 14.0, 10.0]
GEN_TOKENS = [
    9716.0,
    9921.0,
    10135.0,
    10353.0,
    10639.0,
    10969.0,
    11232.0,
    11393.0,
    11686.0,
    11948.0,
]


def key(signal: str, model: str = MODEL, label: str = "") -> SeriesKey:
    return SeriesKey(signal, model, "0", label)


def set_value(page: str, metric: str, value: str) -> str:
    """The page with the sample `metric{engine="0",model_name=...}` set to `value`."""
    head = f'{metric}{{engine="0",model_name="{MODEL}"}} '
    lines = [head + value if line.startswith(head) else line for line in page.split("\n")]
    assert lines != page.split("\n"), f"{metric} is not on the page"
    return "\n".join(lines)


def drop(page: str, pattern: str) -> str:
    return "\n".join(line for line in page.split("\n") if not re.match(pattern, line))


def scramble_buckets(page: str, histogram: str) -> str:
    """Buckets out of order and decreasing: the halves of the counts swapped, lines reversed."""
    lines = page.split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith(f"{histogram}_bucket{{")]
    assert at == list(range(at[0], at[-1] + 1)), "bucket lines are not together"
    heads = [lines[i].rsplit(" ", 1)[0] for i in at]
    values = [lines[i].rsplit(" ", 1)[1] for i in at]
    finite = len(values) - 1  # the +Inf bucket (the count) stays what it was
    values = values[finite // 2 : finite] + values[: finite // 2] + values[finite:]
    block = [f"{h} {v}" for h, v in zip(heads, values, strict=True)]
    lines[at[0] : at[-1] + 1] = reversed(block)
    return "\n".join(lines)


def serve(
    pages: Iterable[str], models: bytes | None = None, version: bytes | None = None
) -> Script:
    """/metrics steps through `pages` (the last repeats); /version and /v1/models as given, else
    as the real server gave them."""
    bodies = [p.encode() for p in pages]
    polls = count()
    return Script(
        {
            "/metrics": lambda: Answer(bodies[min(next(polls), len(bodies) - 1)]),
            "/version": Answer(version or (REAL / "version.json").read_bytes()),
            "/v1/models": Answer(models or (REAL / "models.json").read_bytes()),
        }
    )


async def watch(url: str, polls: int) -> Monitor:
    """`polls` polls of `url` through the live source into a monitor (rules run on each)."""
    monitor = Monitor(capacity=64)
    async with LiveSource([url], ScrapeOptions(timeout_s=2.0)) as source:
        for _ in range(polls):
            monitor.feed(await source.poll())
    return monitor


def strict_json(text: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are not numbers a consumer can read."""

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in the JSON output")

    return json.loads(text, parse_constant=refuse)


# -- numbers ------------------------------------------------------------------------------------


async def test_nan_inf_are_unknown_and_negative_gauges_are_kept_never_a_crash() -> None:
    from vtop.ui.app import VtopApp

    negative = set_value(
        set_value(PAGES[2], "vllm:kv_cache_usage_perc", "-0.021"),
        "vllm:num_requests_running",
        "-1.0",
    )
    broken = PAGES[3]
    for metric, value in (
        ("vllm:num_requests_running", "NaN"),
        ("vllm:num_requests_waiting", "+Inf"),
        ("vllm:kv_cache_usage_perc", "-Inf"),
    ):
        broken = set_value(broken, metric, value)
    with PageServer(serve([PAGES[0], PAGES[1], negative, broken])) as srv:
        monitor = await watch(srv.url, 4)
    view = monitor.endpoints[srv.url]
    store = view.store
    assert view.last is not None and view.last.ok  # a bad number is not a bad page
    assert store.values("up") == [1.0] * 4
    assert store.values(key("running")) == [8.0, 9.0, -1.0, None]  # NaN: unknown, not 0
    assert store.values(key("waiting")) == [32.0, 31.0, 32.0, None]  # +Inf: unknown
    assert store.values(key("kv_usage")) == [1.0, 1.0, -0.021, None]  # kept, for the UI to flag
    assert store.values(key("generation_tokens")) == GEN_TOKENS[:4]  # the rest of the page
    assert store.events == []
    app = VtopApp(LiveSource([srv.url]), monitor, self_cpu=lambda: 0.4, autopoll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for panel in ("running", "waiting", "kv"):
            assert app.grid.text(f"{panel}.value").split()[0] == "–", panel


async def test_a_counter_going_backwards_is_one_restart_never_a_negative_rate() -> None:
    backwards = set_value(PAGES[5], "vllm:generation_tokens_total", "5000.0")
    pages = [*PAGES[:5], backwards, *PAGES[6:8]]
    with PageServer(serve(pages)) as srv:
        monitor = await watch(srv.url, len(pages))
    store = monitor.endpoints[srv.url].store
    assert [e.kind for e in store.events] == ["restart"]
    gen = store.values(key("generation_tokens"))
    assert gen[:5] == GEN_TOKENS[:5]  # the history before it is untouched
    # A drop is taken as a restart from 0 (Prometheus's rule): what was counted before it is
    # kept as an offset, so the count goes on from there and never down.
    assert gen[5:] == [GEN_TOKENS[4] + raw for raw in (5000.0, GEN_TOKENS[6], GEN_TOKENS[7])]
    for window in (None, 1.0, 2.0, 60.0):
        for k in (key("generation_tokens"), "generation_tokens"):
            rate = store.per_second(k, window)
            assert rate is not None and rate >= 0, (k, window, rate)
            rate = store.rate(k, window or 60.0)
            assert rate is None or rate >= 0, (k, window, rate)


async def test_duplicate_series_count_once_and_extra_labels_fold_in() -> None:
    page = PAGES[0]
    page += (
        # The same line twice (a buggy exporter, two registries): the last one wins.
        f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 99.0\n'
        f'vllm:generation_tokens_total{{engine="0",model_name="{MODEL}"}} {GEN_TOKENS[0]}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        # Labels a proxy or multiprocess mode adds: folded into the series (gauges: the
        # largest, counters: the sum).
        f'vllm:num_requests_waiting{{engine="0",model_name="{MODEL}",pid="7"}} 1000.0\n'
        f'vllm:prompt_tokens_total{{engine="0",model_name="{MODEL}",pid="7"}} 13.0\n'
    )
    with PageServer(serve([page])) as srv:
        monitor = await watch(srv.url, 2)
    store = monitor.endpoints[srv.url].store
    assert store.last(key("running")) == 99.0
    assert store.last(key("generation_tokens")) == GEN_TOKENS[0]  # not doubled
    assert store.last(key("waiting")) == 1000.0
    assert store.last(key("prompt_tokens")) == 4587.0 + 13.0
    assert store.per_second(key("generation_tokens")) == 0.0  # the same page twice


async def test_histograms_without_inf_or_with_decreasing_buckets() -> None:
    """Four servers on one source: the real pages, the same without the `+Inf` bucket (its
    count is `_count`: the same percentiles), with buckets out of order and decreasing
    (percentiles stay finite, ordered and within the bounds), and with neither `+Inf` nor
    `_count` (nothing to compute from: unknown, and the rest of the page still read)."""
    itl = "vllm:inter_token_latency_seconds"
    variants = {
        "/real": PAGES,
        "/no-inf": [drop(p, rf'{itl}_bucket\{{.*le="\+Inf"') for p in PAGES],
        "/scrambled": [scramble_buckets(p, itl) for p in PAGES],
        "/no-count": [drop(p, rf'{itl}_(bucket\{{.*le="\+Inf"|count)') for p in PAGES],
    }
    script = Script({})
    for path, pages in variants.items():
        script.routes[f"{path}/metrics"] = serve(pages).routes["/metrics"]
    with PageServer(script) as srv:
        monitor = Monitor(capacity=64)
        urls = [srv.url + path for path in variants]
        async with LiveSource(urls, ScrapeOptions(timeout_s=2.0)) as source:
            for _ in PAGES:
                monitor.feed(await source.poll())
    stores = {path: monitor.endpoints[srv.url + path].store for path in variants}
    for store in stores.values():
        assert store.values("up") == [1.0] * len(PAGES)
        assert store.values(key("generation_tokens")) == GEN_TOKENS
    qs = (0.5, 0.9, 0.99)
    real = [stores["/real"].hist_quantile(q, key("itl")) for q in qs]
    assert all(v is not None and 0.01 < v < 1.0 for v in real), real
    assert [stores["/no-inf"].hist_quantile(q, key("itl")) for q in qs] == real
    scrambled = [stores["/scrambled"].hist_quantile(q, key("itl")) for q in qs]
    known = [v for v in scrambled if v is not None]
    assert len(known) == len(qs) and all(math.isfinite(v) and 0 <= v <= 80.0 for v in known)
    assert known == sorted(known)
    assert stores["/no-count"].hist_quantile(0.5, key("itl")) is None
    assert stores["/no-count"].hist_quantile(0.5, key("ttft")) is not None


def test_report_and_once_over_every_number_fault_are_strict_json(
    vtop_process: Callable[..., Any],
) -> None:
    """The command line over a server whose pages carry all of the above at once: no crash,
    JSON a strict parser reads (no NaN, no Infinity), one restart, no negative rate, latency
    percentiles finite and within the bucket bounds."""
    itl, ttft = "vllm:inter_token_latency_seconds", "vllm:time_to_first_token_seconds"
    pages = []
    for i, page in enumerate(PAGES):
        page = scramble_buckets(drop(page, rf'{itl}_bucket\{{.*le="\+Inf"'), ttft)
        page += f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} {RUNNING[i]}\n'
        if i == 2:
            page = set_value(page, "vllm:num_requests_waiting", "NaN")
            page = set_value(page, "vllm:kv_cache_usage_perc", "+Inf")
        if i == 3:
            page = set_value(page, "vllm:kv_cache_usage_perc", "-0.021")
        if i == 5:
            page = set_value(page, "vllm:generation_tokens_total", "5000.0")
        pages.append(page)
    with PageServer(serve(pages)) as srv, PageServer(serve([pages[2]])) as nan:
        report = vtop_process(
            "--url",
            srv.url,
            "--report",
            "--format",
            "json",
            "--interval",
            "0.4",
            "--duration",
            "3.2",
        )
        once = vtop_process("--url", nan.url, "--once", "--interval", "0.4")
        (out, err), (once_out, once_err) = (
            report.communicate(timeout=60),
            once.communicate(timeout=60),
        )
    assert judged(report.returncode, out), err
    assert err == "" and once_err == ""
    doc = strict_json(out)
    (ep,) = doc["endpoints"]
    assert ep["status"] == "ok" and ep["restarts"] == 1
    assert [e["kind"] for e in doc["events"]] == ["restart"]
    for name, stat in ep["signals"].items():
        if name.endswith("_per_s"):
            assert all(v is None or v >= 0 for v in stat.values() if not isinstance(v, str))
    assert ep["signals"]["running"]["max"] == 14.0
    for name, bound in (("itl", 80.0), ("ttft", 2560.0)):
        lat = ep["latency"][name]
        for q in ("p50", "p90", "p99"):
            assert lat[q] is not None and 0 <= lat[q] <= bound, (name, q, lat)
    assert once.returncode == 0
    (ep,) = strict_json(once_out)["endpoints"]
    assert ep["status"] == "ok" and ep["signals"]["running"]["last"] == RUNNING[2]
    assert "waiting" not in ep["signals"]  # NaN at every poll: never known, never 0


# -- labels -------------------------------------------------------------------------------------

HOSTILE = (
    "\x1b[31mRED\x1b[0m\x1b[2J\x1b[H\x1b[5;5Hmoved",  # colour, clear screen, cursor moves
    "<script>alert(1)</script>",
    "\x1b]52;c;cHduZWQ=\x07osc52\x1b]2;pwned\x07title",  # clipboard write, terminal title
    "\x9b31mC1red\x9d0;x\x9c",  # the same in 8-bit C1 controls
    "[bold red]x[/]",
    "[@click=app.quit]click me[/]",
    "L" * 10_000,
)
INERT = tuple("".join(c for c in m if c.isprintable()) for m in HOSTILE)
"""What may reach the screen of each: the text, with every control character gone."""
ESCAPES = (
    b"\x1b[31mRED",
    b"RED\x1b[0m\x1b[2J",
    b"\x1b[5;5Hmoved",
    b"\x1b]52;",
    b"\x1b]2;pwn",
    "\x9b".encode(),
    "\x9d".encode(),
    b"\x07osc52",
)
"""The hostile labels' own sequences, as they would appear in what vtop writes."""
HOSTILE_VERSION = "\x1b]2;pwned-version\x07 0.32.0"
TEXTUAL_SEQUENCE = re.compile(r"\x1b\[[0-9;]*[mH]")
"""What Textual writes to draw a screen: colours (SGR) and cursor positions."""
TEXTUAL_TERMINAL = re.compile(r"\x1b(\[[?<>=0-9;]*\$?[A-Za-z]|\]22;[a-z-]*\x07)")
"""What Textual writes to a terminal: those, its modes (alternate screen, mouse, keyboard
protocol) and their queries, and the pointer shape (OSC 22)."""


def hostile_page(page: str) -> str:
    """The page with the key series once per hostile model name (and not for the real one)."""
    keep = (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds",
    )
    out = []
    for line in page.split("\n"):
        if f'model_name="{MODEL}"' not in line:
            out.append(line)
        elif line.startswith(keep):
            out += [line.replace(f'model_name="{MODEL}"', f'model_name="{m}"') for m in HOSTILE]
    return "\n".join(out)


def hostile_server() -> Script:
    models = {"object": "list", "data": [{"id": m, "max_model_len": 2048} for m in HOSTILE]}
    return serve(
        [hostile_page(p) for p in PAGES],
        json.dumps(models).encode(),
        json.dumps({"version": HOSTILE_VERSION}).encode(),
    )


def assert_inert(written: str, what: str, own: re.Pattern[str] | None = None) -> None:
    """None of the hostile labels' sequences in what was written, and no control character
    at all beyond the sequences the program writes itself (`own`: Textual's drawing)."""
    found = [seq for seq in ESCAPES if seq in written.encode()]
    assert not found, f"{what}: hostile sequences reached the terminal: {found}"
    rest = own.sub("", written) if own is not None else written
    bad = sorted({c for c in rest if not c.isprintable() and c not in "\r\n"})
    assert not bad, f"{what}: control characters {bad!r} reached the terminal"


def plain_lines(raw: str) -> list[str]:
    return TEXTUAL_SEQUENCE.sub("", raw).split("\n")


async def test_hostile_labels_are_inert_on_the_dashboard(terminal: Callable[[Any], str]) -> None:
    """Pilot at 80×24, the app as the CLI builds it over a live source: the header (which shows
    the first served model and the version) and the engines screen (every model, press b)."""
    from vtop.ui.app import VtopApp
    from vtop.ui.screens.engines import EnginesScreen

    with PageServer(hostile_server()) as srv:
        source = LiveSource([srv.url], ScrapeOptions(timeout_s=2.0))
        monitor = Monitor(capacity=600)
        app = VtopApp(source, monitor, interval=0.2, self_cpu=lambda: 0.4)
        async with app.run_test(size=(80, 24)) as pilot:
            while monitor.frames < 3:
                await pilot.pause(0.05)
            await pilot.pause(0.1)
            raw = terminal(app)
            assert_inert(raw, "dashboard", TEXTUAL_SEQUENCE)
            lines = plain_lines(raw)
            assert len(lines) == 24 and {cell_len(line) for line in lines} == {80}, lines
            assert lines[0].startswith(f" {srv.url.removeprefix('http://')}  ")
            assert INERT[0][:12] in lines[0]  # the model, cut, its escapes visible as text
            assert "● connected" in lines[0] and "q Quit" in lines[-1]  # the layout holds
            view = monitor.endpoints[srv.url]
            assert view.server.version == "".join(c for c in HOSTILE_VERSION if c.isprintable())
            assert view.server.models == (*INERT[:-1], INERT[-1][:199] + "…")

            await pilot.press("b")
            await pilot.pause(0.2)
            assert isinstance(app.screen, EnginesScreen)
            raw = terminal(app)
            assert_inert(raw, "engines screen", TEXTUAL_SEQUENCE)
            lines = plain_lines(raw)
            assert {cell_len(line) for line in lines} == {80}
            shown = "\n".join(lines)
            for inert in INERT:  # each model's row, markup shown as the text it is (the
                assert inert[:30] in shown, inert[:30]  # model's column: 37 cells at 80)
            assert max(len(run) for run in re.findall("L+", shown)) < 80  # cut, layout kept
            # Click where "click me" is drawn: a link it must not be.
            y = next(i for i, line in enumerate(lines) if "click me" in line)
            await pilot.click(offset=(lines[y].index("click me") + 2, y))
            await pilot.pause(0.2)
            assert app.is_running and isinstance(app.screen, EnginesScreen)
            await pilot.press("escape")
            await pilot.press("q")
    assert app.return_code == 0


def test_hostile_labels_are_inert_in_a_real_terminal(tmux_vtop: Callable[..., Any]) -> None:
    """`vtop --url` in tmux at 80×24: every byte it wrote is free of the labels' sequences,
    the terminal's title and clipboard are untouched, and q still quits cleanly."""
    script = hostile_server()
    with PageServer(script) as srv:
        pane = tmux_vtop("--url", srv.url, "--interval", "0.3")
        title = pane.show("#{pane_title}")
        deadline = time.monotonic() + 20
        while sum(p == "/metrics" for p, _ in script.requests) < 4:
            assert time.monotonic() < deadline, pane.screen()
            time.sleep(0.05)
        time.sleep(0.4)
        screen = pane.screen()
        pane.keys("b")
        time.sleep(0.6)
        engines = pane.screen()
        pane.keys("Escape")
        time.sleep(0.2)
        pane.keys("q")
        status = pane.wait_exit()
        written = pane.written()
    assert status == 0
    assert_inert(written.decode("utf-8", errors="replace"), "tmux", TEXTUAL_TERMINAL)
    assert pane.show("#{pane_title}") == title and "pwned" not in title
    assert pane.tmux("list-buffers") == ""  # no OSC 52 reached the clipboard
    lines = screen.split("\n")
    assert INERT[0][:12] in lines[0] and "● connected" in lines[0]
    assert "q Quit" in screen
    for inert in INERT:  # the model's column: 37 cells at 80
        assert inert[:30] in engines, (inert[:30], engines)
    assert INERT[0][:12].encode() in written  # the escapes' text is what was drawn


def test_hostile_labels_are_inert_in_every_report_format(vtop_process: Callable[..., Any]) -> None:
    formats = ("text", "markdown", "html", "json")
    with PageServer(hostile_server()) as srv:
        args = ("--url", srv.url, "--duration", "0.5", "--interval", "0.25", "--report")
        procs = {fmt: vtop_process(*args, "--format", fmt) for fmt in formats}  # in parallel
        runs = {fmt: (proc, *proc.communicate(timeout=60)) for fmt, proc in procs.items()}
    outputs = {fmt: out for fmt, (_, out, _) in runs.items()}
    for fmt, (proc, out, err) in runs.items():
        assert judged(proc.returncode, out), (fmt, err)
        # stderr: nothing, or vtop's own UNKNOWN line where no finding was still being judged
        # when the half-second window ended (four at once on a busy host can poll that late)
        lines = err.splitlines()
        assert len(lines) <= 1 and all(ln.startswith("vtop: UNKNOWN: ") for ln in lines), err
        assert_inert(err, f"{fmt} stderr")
        assert_inert(out, fmt)
        assert "L" * 201 not in out
    shown = ("[31mRED[0m[2J[H[5;5Hmoved", "vLLM ]2;pwned-version 0.32.0")
    for fmt in ("text", "html"):
        assert all(s in outputs[fmt] for s in shown), fmt
    # Markdown shows the same text, each bracket escaped so that none opens a link
    escaped = ("\\[31mRED\\[0m\\[2J\\[H\\[5;5Hmoved", "vLLM \\]2;pwned-version 0.32.0")
    assert all(s in outputs["markdown"] for s in escaped)
    assert "<script>" not in outputs["html"] and "<script>" not in outputs["markdown"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in outputs["html"]
    doc = strict_json(outputs["json"])
    assert doc["endpoints"][0]["server"]["models"][:3] == list(INERT[:3])
