"""Headless Chromium driven over the DevTools protocol, for tests that must look at a page.

Why a pipe: `--remote-debugging-pipe` makes Chromium read protocol commands from its fd 3 and
write answers to its fd 4, NUL-separated JSON, so a test needs no WebSocket library, opens no
port and cannot meet another test's browser. What the tests need is small (open a URL at a
window size, run a script before a page's own, evaluate JavaScript, click, press a key, take a
screenshot), so this is the whole client.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.host_tools import require

# The flags this machine's closed network needs (without the background-networking ones,
# Chromium's own connections are refused many at a time) and a profile of its own.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    """Chromium answered a command with an error, went away, or a wait ran out."""


class Browser:
    """One headless Chromium with one page; `with Browser(tmp_path) as b: b.open(url)`."""

    def __init__(self, profile: Path, *, width: int = 1280, height: int = 900) -> None:
        executable = require("chromium", "chromium-browser", why="drives a page in a browser")
        profile.mkdir(parents=True, exist_ok=True)
        self._log_path = profile / "chromium.log"
        self._log = self._log_path.open("wb")  # a file, not a pipe nobody drains
        # Our ends and Chromium's ends of the two pipes, all above 10 so that putting Chromium's
        # at 3 and 4 in the child cannot overwrite one before it is copied.
        to_browser_r, to_browser_w = (_high(fd) for fd in os.pipe())
        from_browser_r, from_browser_w = (_high(fd) for fd in os.pipe())

        def at_3_and_4() -> None:
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            pass_fds=(3, 4),
            preexec_fn=at_3_and_4,  # noqa: PLW1509 (two dup2 calls: async-signal-safe)
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._send_fd = to_browser_w
        self._answers = os.fdopen(from_browser_r, "rb", buffering=0)
        self._buffer = b""
        self._next_id = 0
        self._session = ""
        self.width, self.height = width, height
        targets = self.command("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        target_id = (
            page["targetId"]
            if page
            else self.command("Target.createTarget", url="about:blank")["targetId"]
        )
        attached = self.command("Target.attachToTarget", targetId=target_id, flatten=True)
        self._session = attached["sessionId"]
        self.resize(width, height)

    # -- the protocol ----------------------------------------------------------------------

    def command(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and wait for its answer."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read_message()
            if answer.get("id") != self._next_id:
                continue  # an event, or an answer to nobody
            if "error" in answer:
                raise BrowserError(f"{method}: {answer['error'].get('message')}")
            result: dict[str, Any] = answer.get("result", {})
            return result

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = self._answers.read(65536)
            if not chunk:
                log = self._log_path.read_text(errors="replace")[-800:]
                raise BrowserError(f"Chromium went away: {log}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    # -- what tests do -----------------------------------------------------------------------

    def resize(self, width: int, height: int) -> None:
        """The viewport a page lays itself out in (a phone's 390 px, a laptop's 1024 px)."""
        self.width, self.height = width, height
        self.command(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def open(self, url: str, *, timeout_s: float = 30.0) -> None:
        """Navigate and wait until the document has loaded."""
        self.command("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout_s=timeout_s)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        answer = self.command(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression}: {answer['exceptionDetails'].get('text')}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 30.0) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout_s:g} s: {expression}")
            time.sleep(0.1)

    def before_each_page(self, script: str) -> None:
        """Run `script` in every page this browser opens from now on, before the page's own."""
        self.command("Page.enable")
        self.command("Page.addScriptToEvaluateOnNewDocument", source=script)

    def click(self, x: float, y: float) -> None:
        """A left click at (x, y) of the viewport, as a mouse gives it (it focuses what is
        there: a terminal in the page takes keys only once clicked)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.command(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    def press(self, key: str, *, text: str | None = None) -> None:
        """One key down and up, as a user's keyboard sends it (`"q"`, `"Enter"`)."""
        typed = key if text is None and len(key) == 1 else text
        for kind in ("keyDown", "keyUp"):
            params: dict[str, Any] = {"type": kind, "key": key}
            if kind == "keyDown" and typed:
                params["text"] = typed
            self.command("Input.dispatchKeyEvent", **params)

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """A PNG of the viewport (or of the whole page) written to `path`."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.command("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    # -- lifetime ------------------------------------------------------------------------------

    def close(self) -> None:
        try:
            self._session = ""
            self.command("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._send_fd)
        self._answers.close()
        self._log.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _high(fd: int) -> int:
    """`fd` moved to a number of 10 or more (inheritable: the child needs its ends)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    os.set_inheritable(moved, True)
    return moved
