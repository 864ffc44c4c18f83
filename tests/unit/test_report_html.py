"""The HTML report: one self-contained file, well-formed, and drawn by a real browser.

Chromium (the Debian package; scripts/test.sh installs it) opens the file headless with no
network and screenshots it; the PNG must be a real page (not blank), and the file must not
ask for anything outside itself.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

from tests.fakerules import kv_full
from tests.host_tools import require
from vtop.report import render
from vtop.report.run import replay_document

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def html_report() -> str:
    return render(replay_document(str(GOLDEN / "kv-pressure.vtrace"), findings=kv_full), "html")


class _Tags(HTMLParser):
    VOID: ClassVar[set[str]] = {"meta", "br", "line", "rect", "circle", "path"}

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
    assert tags.seen.count("svg") == 7  # six signal charts and the findings timeline
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


def test_chromium_renders_the_report(tmp_path: Path) -> None:
    browser = require("chromium", "chromium-browser", why="screenshots the HTML report")
    page = tmp_path / "report.html"
    page.write_text(html_report(), encoding="utf-8")
    shot = tmp_path / "report.png"
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,2000",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.exists(), result.stderr[-2000:]
    width, height, variety = _png_size_and_variety(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    assert variety > 40  # a drawn page, not a blank one
    keep = Path("/tmp/vtop-report-screenshot.png")
    shutil.copyfile(shot, keep)  # for a human to look at after the run
