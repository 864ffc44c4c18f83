"""`vtop sim` over HTTP gets the verdict `vtop --demo` gets, as a user would run the two.

The demo runs the twin straight through virtual time; the sim server moves it in driver ticks
and answers /metrics in wall time, and vtop's live source polls on its own cadence (a poll a
second from the previous one's start). The frontend-bound server once read running = 0 and
~35 alternately over HTTP, so no stale pair and no verdict, while the demo read stale on every
poll: the page was rendered at an early estimate of the answer, mid-way through the API
server's loop cycle. Both processes are real: the server as `vtop sim`, the report as
`vtop --url ... --report`, started 15 s after the server as in the bug report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_RUNNING_S = 15.0
REPORT_S = 35


@pytest.mark.timeout(240)
def test_frontend_bound_over_http_gets_the_frontend_bound_verdict() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtop",
            "sim",
            "--scenario",
            "frontend-bound",
            "--port",
            "0",
            "--duration",
            "150",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, line
        time.sleep(SERVER_RUNNING_S)
        report = subprocess.run(
            [
                sys.executable,
                "-m",
                "vtop",
                "--url",
                match.group(0),
                "--report",
                "--duration",
                str(REPORT_S),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=150,
            check=False,
        )
    finally:
        server.kill()
        server.communicate(timeout=30)
    doc = json.loads(report.stdout)
    fired = {f["rule"]: f for f in doc["findings"] if f["counts"]}
    assert "frontend-bound" in fired, (doc["status"], doc["reason"], report.stderr[-2000:])
    assert doc["reason"].startswith("frontend-bound on "), doc["reason"]
