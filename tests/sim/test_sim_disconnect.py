"""A client that hangs up on `vtop sim` is normal: no traceback; a real error still prints one.

A scraper that times out, `curl` stopped with Ctrl-C, a browser tab closed: each leaves the
server writing to (or reading from) a socket the peer reset, which socketserver reports with a
full traceback (`BrokenPipeError`, `ConnectionResetError`). `vtop sim` runs as a user starts
it, and real clients reset their connections before, during and after an answer; its stderr
must stay empty. A bug in a handler is not a hang-up and keeps its traceback.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from vtop.sim.server import serve
from vtop.sim.twin import Twin

ROOT = Path(__file__).resolve().parents[2]
REQUEST = b"GET /metrics HTTP/1.1\r\nHost: sim\r\nAccept-Encoding: identity\r\n\r\n"


def hang_up(port: int, read: int) -> None:
    """Ask for /metrics, read `read` bytes of the answer (0: none), then reset the connection
    (SO_LINGER 0: an RST, as a killed client's kernel sends)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(REQUEST)
        got = 0
        while got < read:
            chunk = sock.recv(read - got)
            if not chunk:
                break
            got += len(chunk)


@pytest.mark.parametrize("scenario", ["healthy", "frontend-bound"])
def test_clients_hanging_up_leave_stderr_empty(scenario: str) -> None:
    """frontend-bound answers /metrics late (its API server is busy), so a client that gives
    up before the answer leaves the server writing to a reset socket: the broken pipe."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtop",
            "sim",
            "--scenario",
            scenario,
            "--port",
            "0",
            "--speed",
            "5",
            "--duration",
            "6",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        port = int(match.group(1))
        for i in range(12):
            hang_up(port, read=(0, 1, 200, 4096)[i % 4])
        time.sleep(1.0)  # the server's threads meet the resets
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert resp.status == 200  # and it still answers
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err == "", err


class BrokenTwin(Twin):
    """A twin whose page cannot be rendered: a bug, not a client going away."""

    def metrics_text(
        self, dialect: str | None = None, *, process_metrics: bool = True, at: float | None = None
    ) -> bytes:
        raise RuntimeError("the page cannot be rendered")


def test_a_real_error_keeps_its_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with serve(BrokenTwin("healthy")) as srv:
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(srv.url + "/metrics", timeout=10)
        hang_up(srv.port, read=0)  # a hang-up beside it adds nothing
        deadline = time.monotonic() + 5
        err = ""
        while "RuntimeError" not in err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError: the page cannot be rendered" in err
    assert "ConnectionResetError" not in err and "BrokenPipeError" not in err
