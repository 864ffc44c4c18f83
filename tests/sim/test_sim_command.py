"""`vtop sim` through its `register()` / `run()` pair, as the CLI will wire it."""

from __future__ import annotations

import argparse
import re
import threading
import time
import urllib.request

import pytest

from vtop.sim import command
from vtop.sim.scenarios import SCENARIOS


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
    assert command.run(parse("--speed", "0")) == 2
    assert "vtop sim:" in capsys.readouterr().err


def test_serves_instances_until_duration(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse(
        "--scenario", "budget-too-small", "--port", "0", "--instances", "2",
        "--duration", "1.5", "--speed", "5", "--emulate-version", "0.10",
    )  # fmt: skip
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
