"""Secrets go to the server and nowhere else: not a report, a trace, a log, an error, a screen.

Issue 8 ("Hardening"): with `VTOP_API_KEY`, a `--header` and a URL with `user:password@`, vtop
must send each where it belongs (request headers, checked on the server's side) and print none
of them, in any form (the base64 of basic auth included), anywhere a user, a log collector or a
shared trace could see it. tests/unit/test_scraper.py and tests/unit/test_report.py prove the
pieces (redaction, option reprs, a report's bytes); this is the end-to-end version: the command
line in every mode, a 401 and a refused connection (errors are where URLs get printed), the
recorded trace *decompressed* (its polls are deflate streams, a plain grep of the file proves
nothing), Python logging at DEBUG (httpx logs every request's URL), and the dashboard in a real
terminal, recording included.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.localfaults import judged
from tests.pageserver import Answer, PageServer, Script
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.vllm import ScrapeOptions

TOKEN = "secret-token-xyz"
HEADER = "hdr-secret-abc"
USER, PASSWORD = "vtop-user", "pass-url-secret"
SECRETS = (
    TOKEN,
    HEADER,
    PASSWORD,
    f"{USER}:",
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),  # what basic auth sends
)
ENV = {"VTOP_API_KEY": TOKEN}
HEADER_ARG = f"X-Auth: {HEADER}"


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


def assert_no_secret(text: str | bytes, where: str) -> None:
    data = text.encode() if isinstance(text, str) else text
    leaked = [s for s in SECRETS if s.encode() in data]
    assert not leaked, f"{where} carries {leaked}"


def assert_sent(script: Script) -> None:
    """The secrets did reach the server, where they belong."""
    headers = [h for path, h in script.requests if path == "/metrics"]
    assert headers, "no poll reached the server"
    for h in headers:
        assert h.get("Authorization") == "Basic " + SECRETS[-1]  # URL credentials win
        assert h.get("X-Auth") == HEADER


def trace_contents(path: Path) -> bytes:
    """Every byte a trace holds, its deflated polls inflated (docs/trace-format.md): the
    header and index JSON, and each poll's body (META, EXTRA, DEF paths...)."""
    data = path.read_bytes()
    assert data[:8] == b"VTOPTRC\x1a", "not a trace"
    out = [data]
    pos, inflate, polls = 12, None, 0
    while pos + 9 <= len(data):
        kind, length, _crc = struct.unpack_from("<BII", data, pos)
        payload = data[pos + 9 : pos + 9 + length]
        pos += 9 + length
        if kind == 2:  # KEYFRAME: "VTKF", t, poll, then a fresh raw-deflate stream
            inflate = zlib.decompressobj(-15)
            payload = payload[16:]
        if kind in (2, 3):
            assert inflate is not None, "a delta before any keyframe"
            out.append(inflate.decompress(payload + b"\x00\x00\xff\xff"))
            polls += 1
    assert polls >= 2, f"{path} holds {polls} polls"
    return b"\n".join(out)


@pytest.fixture
def secured(real_vllm: Callable[..., Script]) -> Script:
    """A real vLLM's answers behind a proxy that wants the header (else 401)."""
    script = real_vllm()
    unauthorized = Answer(b"Unauthorized", status=401)
    script.guard = lambda headers: None if headers.get("X-Auth") == HEADER else unauthorized
    return script


def test_reports_traces_and_stderr_carry_no_secret(
    secured: Script, vtop_process: Callable[..., Any], tmp_path: Path
) -> None:
    """`--report` in every format, each recording a trace, all at once; then `vtop trace info`
    on a trace and a replayed report of it."""
    runs = []
    with PageServer(secured) as srv:
        for fmt in ("text", "markdown", "html", "json"):
            trace = tmp_path / f"{fmt}.vtrace"
            proc = vtop_process(
                "--url",
                with_credentials(srv.url),
                "--header",
                HEADER_ARG,
                "--report",
                "--format",
                fmt,
                "--record",
                str(trace),
                "--duration",
                "0.6",
                "--interval",
                "0.3",
                env=ENV,
            )
            runs.append((fmt, trace, proc))
        outputs = [(fmt, trace, proc, *proc.communicate(timeout=60)) for fmt, trace, proc in runs]
        assert_sent(srv.script)
    for fmt, trace, proc, out, err in outputs:
        assert judged(proc.returncode, out), (fmt, err)
        assert srv.url in out  # the endpoint is named, without its credentials
        assert_no_secret(out, f"the {fmt} report")
        assert_no_secret(err, f"stderr of the {fmt} report")
        inflated = trace_contents(trace)
        # The series' names live only in the deflated polls: proof that they were inflated.
        assert b'"kv_usage"' in inflated and b'"kv_usage"' not in trace.read_bytes()
        assert_no_secret(inflated, f"the trace recorded with the {fmt} report")
    trace = outputs[0][1]
    info = vtop_process("trace", "info", str(trace))
    replay = vtop_process("--replay", str(trace), "--report", "--format", "json")
    for proc in (info, replay):
        out, err = proc.communicate(timeout=60)
        assert judged(proc.returncode, out), err
        assert srv.url in out
        assert_no_secret(out + err, " ".join(str(a) for a in proc.args[-4:]))


def test_errors_name_the_url_without_its_credentials(
    vtop_process: Callable[..., Any], tmp_path: Path
) -> None:
    """A 401 (the proxy refuses the token) and a refused connection: the one line names the
    URL, without `user:password@`, and says what to do; no output carries a secret."""
    refused = "http://127.0.0.1:1"
    with PageServer(Script({"/metrics": Answer(b"Unauthorized", status=401)})) as srv:
        runs = []
        for i, url in enumerate((srv.url, refused)):
            record = ["--record", str(tmp_path / f"{i}.vtrace"), "--duration", "0.7"]
            for mode in (["--report", "--duration", "0.1"], ["--once"], record):
                runs.append(
                    vtop_process(
                        "--url",
                        with_credentials(url),
                        "--header",
                        HEADER_ARG,
                        *mode,
                        "--interval",
                        "0.3",
                        env=ENV,
                    )
                )
        results = [(proc, *proc.communicate(timeout=60)) for proc in runs]
    hint_401 = (
        f"HTTP 401 Unauthorized from {srv.url}/metrics: needs credentials: set VTOP_API_KEY "
        "or --header 'Authorization: …'"
    )
    refused_line = f"cannot connect to {refused}/metrics: connection refused"
    for (proc, out, err), line in zip(results, [hint_401] * 3 + [refused_line] * 3, strict=True):
        assert_no_secret(out + err, f"vtop {' '.join(proc.args[3:])}")
        if "--report" in proc.args and line == refused_line:  # never answered: said at once
            nobody = f"nothing listens at {refused}: connection refused"
            assert proc.returncode == 3 and err == f"vtop: {nobody}\n"
        elif "--report" in proc.args:
            assert proc.returncode == 3 and err == f"vtop: UNKNOWN: {line}\n"
        elif "--once" in proc.args:
            assert proc.returncode == 3 and json.loads(out)["endpoints"][0]["error"] == line
    for trace in tmp_path.glob("*.vtrace"):
        inflated = trace_contents(trace)
        assert hint_401.encode() in inflated or refused_line.encode() in inflated  # deflated
        assert_no_secret(inflated, f"the trace of {trace.name}")


async def test_logs_carry_no_secret(secured: Script, caplog: pytest.LogCaptureFixture) -> None:
    """Every logger at DEBUG (httpx logs each request's URL at INFO) while vtop polls, meets a
    401, reconnects and re-reads the server."""
    caplog.set_level("DEBUG")
    with PageServer(secured) as srv:
        options = ScrapeOptions.from_env(interval_s=1.0, headers=[HEADER_ARG], environ=ENV)
        now = [1000.0]  # LiveSource's clock, moved past its reconnect back-off by hand
        url = with_credentials(srv.url)
        async with LiveSource([url], options, clock=lambda: now[0]) as source:
            monitor = Monitor(capacity=16)
            monitor.feed(await source.poll())
            good = secured.routes["/metrics"]
            secured.routes["/metrics"] = lambda: Answer(b"Unauthorized", status=401)
            monitor.feed(await source.poll())
            secured.routes["/metrics"] = good
            now[0] += 1.0
            monitor.feed(await source.poll())
        assert_sent(srv.script)
    view = monitor.endpoints[srv.url]
    assert [e.kind for e in view.store.events] == ["disconnect", "reconnect"]
    assert_no_secret(caplog.text, "the log")
    assert f"HTTP Request: GET {srv.url}/metrics" in caplog.text  # the log was on
    assert_no_secret(repr(view.store.events) + repr(options) + repr(view.last), "vtop's values")


def test_the_dashboard_and_its_recording_show_no_secret(
    secured: Script, tmux_vtop: Callable[..., Any], tmp_path: Path
) -> None:
    """`vtop --url http://user:password@… --header … ` with VTOP_API_KEY in a real terminal:
    connected, then refused with a 401, then recording (r) to a trace; every byte written to
    the terminal, and the trace inflated, carry no secret."""
    good = secured.routes["/metrics"]
    with PageServer(secured) as srv:
        pane = tmux_vtop(
            "--url",
            with_credentials(srv.url),
            "--header",
            HEADER_ARG,
            "--interval",
            "0.3",
            env=ENV,
            size=(120, 40),
            cwd=tmp_path,
        )

        def until(condition: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + 20
            while not condition():
                assert time.monotonic() < deadline, f"{what}; the screen:\n{pane.screen()}"
                time.sleep(0.05)

        until(lambda: "● connected" in pane.screen(), "connected")
        host = srv.url.removeprefix("http://")
        assert f" {host}  " in pane.screen().split("\n")[0]  # the header names it, bare
        pane.keys("r")
        until(lambda: any(tmp_path.glob("vtop-*.vtrace")), "a recording")
        secured.routes["/metrics"] = lambda: Answer(b"Unauthorized", status=401)
        until(lambda: f"HTTP 401 Unauthorized from {srv.url}/metrics" in pane.screen(), "a 401")
        refused = pane.screen()
        secured.routes["/metrics"] = good
        until(lambda: "● connected" in pane.screen(), "connected again")
        screen = pane.screen()
        pane.keys("r")
        time.sleep(0.3)
        pane.keys("q")
        assert pane.wait_exit() == 0
        assert_sent(srv.script)
    assert_no_secret(pane.written(), "the terminal")
    assert_no_secret(screen + refused, "the screen")
    (trace,) = tmp_path.glob("vtop-*.vtrace")
    inflated = trace_contents(trace)
    assert b"HTTP 401 Unauthorized from" in inflated
    assert_no_secret(inflated, "the dashboard's recording")
