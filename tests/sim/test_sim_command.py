"""`vtop sim` through its `register()` / `run()` pair, as the CLI will wire it."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from vtop.cli import sim as command
from vtop.sim.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vtop")
    sub = parser.add_subparsers(dest="command")
    command.register(sub)
    return parser.parse_args(["sim", *argv])


def test_list_describes_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.run(parse("--list")) == 0
    out = capsys.readouterr().out
    for name, sc in SCENARIOS.items():
        assert name in out
        if sc.rule:
            assert f"rule {sc.rule}" in out


def test_unknown_scenario_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.run(parse("--scenario", "nope")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vtop sim: unknown scenario 'nope'; known: healthy")
    assert "\n" not in err


def test_bad_version_and_speed(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.run(parse("--emulate-version", "2.0")) == 2
    assert "vtop sim:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # the parser's range: one usage line
        command.build_parser().parse_args(["--speed", "0"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "vtop sim: error: argument --speed: 0 is not a number from 0.01 to 1000 "
        "(see vtop sim --help)\n"
    )


def test_serves_instances_until_duration(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(
        "--scenario",
        "budget-too-small",
        "--port",
        "0",
        "--instances",
        "2",
        "--duration",
        "1.5",
        "--speed",
        "5",
        "--emulate-version",
        "0.10",
    )
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(command.run(args)))
    thread.start()
    deadline = time.monotonic() + 10
    out = ""
    urls: list[str] = []
    while time.monotonic() < deadline and len(urls) < 2:
        out += capsys.readouterr().out
        urls = re.findall(r"http://127\.0\.0\.1:\d+", out)
        time.sleep(0.05)
    assert len(urls) == 2 and urls[0] != urls[1]
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
            page = resp.read()
        assert b"vllm:gpu_cache_usage_perc{" in page  # 0.10 dialect
        assert b'vllm:num_requests_running{engine="0"' in page
    thread.join(timeout=10)
    assert result == [0]


def test_help_states_every_default() -> None:
    parser = argparse.ArgumentParser(prog="vtop")
    sim = command.register(parser.add_subparsers())
    for action in sim._actions:
        if action.option_strings and action.dest not in ("help", "list"):
            assert "default" in (action.help or ""), action.option_strings
    text = sim.format_help()
    assert "(default: healthy;" in text and "(default: 8000;" in text
    assert "Without flags: scenario 'healthy' on http://127.0.0.1:8000/metrics" in text


START = re.compile(
    r"vtop sim: serving scenario 'healthy' as vLLM 0\.32\.0 on "
    r"http://127\.0\.0\.1:(\d+)/metrics \(Ctrl-C stops\)\n"
)


def test_a_server_says_in_one_line_what_it_serves_and_ctrl_c_stops_it() -> None:
    """`vtop sim` with no scenario (any free port, as 8000 may be taken here). A server still
    up 30 s after Ctrl-C (seen twice, in test runs held at nice 19) is sent
    SIGABRT, and faulthandler's stacks say where it was."""
    argv = [sys.executable, "-X", "faulthandler", "-m", "vtop", "sim", "--port", "0"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = START.fullmatch(line)
        assert match, line
        with urllib.request.urlopen(
            f"http://127.0.0.1:{match.group(1)}/metrics", timeout=10
        ) as resp:
            assert b"vllm:num_requests_running" in resp.read()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=15)
            pytest.fail(f"`vtop sim` still up 30 s after Ctrl-C; its stacks:\n{err}")
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "", "")


def test_the_start_line_names_the_pace_and_the_end() -> None:
    line = command.started("frontend-bound", "http://127.0.0.1:8001", "0.10.0", 5.0, 6.0)
    assert line == (
        "vtop sim: serving scenario 'frontend-bound' as vLLM 0.10.0 on "
        "http://127.0.0.1:8001/metrics at 5x real time (stops after 6 s)"
    )
