"""`vtop --web` served to a real headless Chromium: the page, the verdict, the keys, the token.

`vtop --demo --web 127.0.0.1:PORT` runs as a user runs it (a process of its own); the test
reads the one line it prints, opens that URL in Chromium, and reads what the page's terminal
shows. textual.js draws with xterm.js on a canvas, so there is no text in the DOM to read: a
script that runs before the page's own (`CAPTURE`) keeps the object textual.js makes for the
terminal, and `SCREEN` reads xterm.js's buffer through its public API (`buffer.active`,
`getLine`, `translateToString`), row by row, as the user sees it. Before the page is opened, a
missing or wrong token is refused (403) on the page, the websocket and the static files, and
no app process has started; once the page is closed, its app process ends. The page also works
behind a proxy that serves the port under a path prefix (`tests/ui/prefix_proxy.py`).
"""

from __future__ import annotations

import http.client
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.chromium import Browser
from tests.ui.prefix_proxy import prefix_proxy

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

CAPTURE = """
// textual.js's terminal class sets `this.websocket_url` first thing in its constructor; a
// setter of that name on Object.prototype sees the new object, keeps it, and steps aside.
Object.defineProperty(Object.prototype, "websocket_url", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "websocket_url", {
      value, writable: true, configurable: true, enumerable: true,
    });
    (window.vtopTerminals = window.vtopTerminals || []).push(this);
  },
});
"""

SCREEN = """(() => {
  const session = (window.vtopTerminals || [])[0];
  const terminal = session && session.terminal;
  if (!terminal) return "";
  const buffer = terminal.buffer.active, rows = [];
  for (let y = 0; y < terminal.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
})()"""


@dataclass(frozen=True)
class Served:
    process: subprocess.Popen[str]
    url: str
    token: str
    port: int

    def apps(self) -> list[psutil.Process]:
        """The app processes the server runs (one a browser session), shells left aside."""
        children = psutil.Process(self.process.pid).children(recursive=True)
        return [c for c in children if "vtop" in c.cmdline() and c.name() != "sh"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def first_line(process: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    assert ready, f"vtop --web printed nothing in {timeout_s:g} s"
    return process.stdout.readline()


@pytest.fixture
def served() -> Iterator[Served]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "vtop", "--demo", "--web", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        line = first_line(process)
        found = re.fullmatch(
            rf"vtop: dashboard at (http://127\.0\.0\.1:{port}/([A-Za-z0-9_-]{{32}})/) "
            r"\(Ctrl-C stops\)\n",
            line,
        )
        assert found, line
        yield Served(process, found[1], found[2], port)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        out, err = process.communicate()
    assert code == 0, err
    assert found[2] not in out + err  # printed once, in the line above, never again


def status(port: int, path: str, *, websocket: bool = False) -> tuple[int, str]:
    """The status and body of a GET (a websocket handshake with `websocket`)."""
    headers = {}
    if websocket:
        headers = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def location(port: int, path: str) -> str | None:
    """Where a GET of `path` is redirected to, as the server words it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 302, response.status
        return response.getheader("Location")
    finally:
        connection.close()


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} after {timeout_s:g} s"
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_the_dashboard_in_a_browser(served: Served, tmp_path: Path) -> None:
    token, port = served.token, served.port
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    refused = [
        ("/", False),
        (f"/{wrong}/", False),
        ("/ws", True),
        (f"/{wrong}/ws", True),
        ("/static/js/textual.js", False),
        (f"/{wrong}/static/js/textual.js", False),
        (f"/ws?token={token}", True),  # the token is a path's, not a query's
    ]
    for path, websocket in refused:
        code, body = status(port, path, websocket=websocket)
        assert code == 403, path
        assert token not in body
    assert served.apps() == [], "a refused request started an app"
    assert status(port, f"/{token}/static/js/textual.js")[0] == 200
    assert location(port, f"/{token}?fontsize=14") == f"{token}/?fontsize=14"  # relative

    with Browser(tmp_path / "chromium", width=1400, height=900) as browser:
        browser.open(f"http://127.0.0.1:{port}/{wrong}/")
        assert "403" in browser.evaluate("document.body.innerText")
        assert served.apps() == []

        browser.before_each_page(CAPTURE)
        browser.open(served.url)
        # The demo's verdict: the finding has fired (WARN), not merely "likely".
        browser.wait_for(f"{SCREEN}.includes('WARN budget-too-small')", timeout_s=120)
        screen = browser.evaluate(SCREEN)
        assert "sim://budget-too-small" in screen and "Running" in screen
        browser.screenshot(tmp_path / "dashboard.png")

        apps = served.apps()
        assert len(apps) == 1, apps
        words = apps[0].cmdline()
        assert words[-3:] == ["-m", "vtop", "--demo"]  # the same words, less --web
        assert not any(token in word for word in words)
        assert not any(token in value for value in apps[0].environ().values())

        assert "vtop keys" not in screen
        browser.click(700, 450)  # the terminal takes keys once clicked, as a user does
        browser.press("?")
        browser.wait_for(f"{SCREEN}.includes('vtop keys')", timeout_s=30)
        browser.screenshot(tmp_path / "help.png")
    # The page is gone: its session's app ends with it.
    wait_until(lambda: ended(apps[0]), "the closed page's app still runs")
    assert served.apps() == []


@pytest.mark.timeout(300)
def test_stopping_the_server_ends_its_sessions(served: Served, tmp_path: Path) -> None:
    """Ctrl-C with a page open: its app is told to quit, the page says the session ended, and
    the server exits 0 (the fixture checks) leaving no app behind."""
    with Browser(tmp_path / "chromium", width=1024, height=700) as browser:
        browser.open(served.url)
        browser.wait_for("document.body.classList.contains('-first-byte')", timeout_s=60)
        apps = served.apps()
        assert len(apps) == 1
        served.process.send_signal(signal.SIGINT)
        served.process.wait(timeout=30)
        browser.wait_for("document.body.classList.contains('-closed')", timeout_s=10)
    assert all(ended(app) for app in apps)


@pytest.mark.timeout(300)
def test_behind_a_proxy_that_adds_a_path_prefix(served: Served, tmp_path: Path) -> None:
    """The page's URLs are relative: served as `/proxy/PORT/TOKEN/` by a proxy that strips
    the prefix (jupyter-server-proxy's way), it loads, connects and draws the dashboard; the
    bare `/TOKEN` is redirected within the prefix."""
    with prefix_proxy() as proxy, Browser(tmp_path / "chromium", width=1024, height=700) as b:
        base = f"http://127.0.0.1:{proxy}/proxy/{served.port}/{served.token}"
        b.before_each_page(CAPTURE)
        b.open(base)
        assert b.evaluate("location.href") == f"{base}/"
        b.wait_for(f"{SCREEN}.includes('sim://budget-too-small')", timeout_s=60)


def ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
