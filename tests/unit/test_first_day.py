"""A newcomer's first day (issue 29): the trips met in the first minutes, run as a user runs them.

Each is the real `python -m vtop` against real sockets: a URL httpx cannot read was an internal
error; a report on a port where nothing listens polled it for its whole 30 s before UNKNOWN,
and now says so in one line after `STARTUP_S` (3 s), unless `--wait-for` gives a server being
started time to come up; a target that answered once is still ridden out. `--url localhost`
means port 80 and, refused, says vLLM's is 8000. `vtop --help` names every sub-command from
the dispatcher's table, every `--help` ends with examples that parse, and `vtop sim --list`
never breaks a flag at its hyphen.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from tests.prom import free_port
from vtop.cli import main as vtop_main
from vtop.cli.dispatch import COMMANDS
from vtop.cli.examples import EXAMPLES, command
from vtop.cli.monitor import build_parser as monitor_parser
from vtop.report.run import STARTUP_S
from vtop.sim.scenarios import SCENARIOS
from vtop.sources.urls import port_hint

ROOT = Path(__file__).resolve().parents[2]
IDLE = (ROOT / "tests/fixtures/metrics/vllm-0.32/idle.txt").read_bytes()
SLOW_START_S = 1.5
"""A generous allowance for starting Python and importing vtop on a busy two-core machine."""


def vtop(*args: str, cwd: Path = ROOT, timeout: float = 60) -> tuple[int, str, str, float]:
    """`python -m vtop ARGS`: exit code, stdout, stderr, and its wall time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VTOP_API_KEY", None)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - start


def start_vtop(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VTOP_API_KEY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "vtop", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# -- (a) a URL httpx cannot read -------------------------------------------------------------


def test_text_after_an_ipv6_address_is_one_usage_line_in_every_mode(tmp_path: Path) -> None:
    """`http://[::1]x`: urlsplit reads it (port None), httpx does not; it was `internal
    error, no verdict: InvalidURL: Invalid port: 'x'`."""
    (tmp_path / "fleet.txt").write_text("http://127.0.0.1:8000\nhttp://[::1]x\n")
    runs = {
        ("--url", "http://[::1]x", "--once"): (2, "vtop: --url: URL 'http://[::1]x'"),
        ("--url", "http://[::1]x", "--report"): (3, "vtop: --url: URL 'http://[::1]x'"),
        ("--targets", "fleet.txt", "--report"): (3, "vtop: fleet.txt:2: URL 'http://[::1]x'"),
        ("whatif", "--url", "http://[::1]x", "--set", "max_num_seqs=8"): (
            2,
            "vtop: --url: URL 'http://[::1]x'",
        ),
    }
    for args, (code, start) in runs.items():
        rc, out, err, _ = vtop(*args, cwd=tmp_path)
        assert (rc, out) == (code, ""), (args, err)
        assert err == f"{start} has a bad port\n", args


# -- (b) nothing listens -------------------------------------------------------------------


def test_a_report_where_nothing_listens_says_so_in_seconds() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    rc, out, err, wall = vtop("--url", url, "--report", "--format", "json")
    assert rc == 3
    assert err == f"vtop: nothing listens at {url}: connection refused\n"
    doc = json.loads(out)  # the document still comes, for the scripts that read it
    assert doc["status"] == "UNKNOWN" and doc["exit_code"] == 3
    assert doc["window"]["duration_s"] <= STARTUP_S + 0.5, doc["window"]
    assert wall < STARTUP_S + SLOW_START_S + 1.0  # it polled a closed port for 30 s


def test_a_fleet_where_nothing_listens_names_every_url(tmp_path: Path) -> None:
    ports = sorted({free_port(), free_port()})
    fleet = tmp_path / "fleet.txt"
    fleet.write_text("".join(f"http://127.0.0.1:{p}\n" for p in ports))
    rc, _, err, _ = vtop("--targets", str(fleet), "--report", "--interval", "0.5")
    urls = ", ".join(f"http://127.0.0.1:{p}" for p in ports)
    assert (rc, err) == (3, f"vtop: nothing listens at {urls}: connection refused\n")


def test_wait_for_waits_for_a_server_being_started() -> None:
    """A script starts vLLM, then the report: the report starts with the first answer, and
    the refusals before it are no part of it (the endpoint is not "partly unreadable")."""
    port = free_port()
    proc = start_vtop(
        "--url",
        f"http://127.0.0.1:{port}",
        "--report",
        "--format",
        "json",
        "--wait-for",
        "30s",
        "--duration",
        "2",
        "--interval",
        "0.5",
    )
    time.sleep(STARTUP_S + SLOW_START_S + 1.0)  # past the default wait: without it, given up
    assert proc.poll() is None, proc.communicate()
    version = Answer(b'{"version": "0.32.0"}', content_type="application/json")
    with PageServer(Script({"/metrics": Answer(IDLE), "/version": version}), port=port):
        out, err = proc.communicate(timeout=60)
    assert "nothing listens" not in err, err
    doc = json.loads(out)
    (endpoint,) = doc["endpoints"]
    assert endpoint["failed_polls"] == 0 and endpoint["polls"] >= 2, endpoint
    assert endpoint["server"]["version"] == "0.32.0"  # the first answer's discovery was kept
    assert doc["window"]["duration_s"] >= 2.0 - 0.05


def test_wait_for_that_runs_out_says_nothing_listens() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    rc, _, err, wall = vtop("--url", url, "--report", "--wait-for", "1s")
    assert (rc, err) == (3, f"vtop: nothing listens at {url}: connection refused\n")
    assert wall < 1.0 + SLOW_START_S + 1.0


def test_a_host_name_that_does_not_resolve_is_said_in_seconds() -> None:
    """`.invalid` never resolves (RFC 6761): a typo in the host name is said like a closed
    port, not after the whole window of polls that cannot reach anything."""
    url = "http://no-such-host.invalid:8000"
    rc, out, err, wall = vtop("--url", url, "--report", "--format", "json")
    assert (rc, err) == (3, f"vtop: nothing answers at {url}: unknown host\n")
    assert json.loads(out)["status"] == "UNKNOWN"
    assert wall < STARTUP_S + SLOW_START_S + 5.0  # a resolver may take a moment to say no


def test_a_server_that_answered_and_went_down_is_ridden_out() -> None:
    script = Script({"/metrics": Answer(IDLE)})
    with PageServer(script) as srv:
        proc = start_vtop(
            "--url", srv.url, "--report", "--format", "json", "--duration", "6", "--interval", "0.5"
        )
        deadline = time.monotonic() + 30
        while "/metrics" not in [path for path, _ in script.requests]:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    out, err = proc.communicate(timeout=60)  # the server is down from here on
    assert "nothing listens" not in err, err
    doc = json.loads(out)
    assert doc["window"]["duration_s"] >= 6.0 - 0.05  # the whole window, not STARTUP_S
    assert doc["endpoints"][0]["failed_polls"] >= STARTUP_S / 0.5


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--url", "http://127.0.0.1:9", "--once", "--wait-for", "5s"], 2),
        (["--url", "http://127.0.0.1:9", "--wait-for", "5s"], 2),
        (["--demo", "--report", "--wait-for", "5s"], 3),
    ],
    ids=["once", "dashboard", "demo"],
)
def test_wait_for_goes_with_a_live_report_only(
    args: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert vtop_main(args) == code
    err = capsys.readouterr().err
    assert (
        err == "vtop: --wait-for goes with --report on a live server (--url, --targets, "
        "--discover)\n"
    )


def test_a_wait_for_that_is_no_duration_is_one_usage_line() -> None:
    rc, _, err, _ = vtop("--url", "http://127.0.0.1:9", "--report", "--wait-for", "soon")
    assert rc == 3 and err.startswith("vtop: error: argument --wait-for: 'soon' is not a duration")


# -- (c) no port ---------------------------------------------------------------------------

NO_PORT = "(no port given, so port 80; vLLM listens on 8000 by default: --url 127.0.0.1:8000)"


@pytest.mark.skipif(listening(80), reason="something listens on 127.0.0.1:80 here")
def test_a_url_without_a_port_that_is_refused_says_vllm_listens_on_8000() -> None:
    rc, _, err, _ = vtop("--url", "127.0.0.1", "--report")
    assert rc == 3
    assert err == f"vtop: nothing listens at http://127.0.0.1: connection refused {NO_PORT}\n"
    rc, out, _, _ = vtop("--url", "127.0.0.1", "--once")
    (endpoint,) = json.loads(out)["endpoints"]
    assert rc == 3
    assert endpoint["error"] == (
        f"cannot connect to http://127.0.0.1/metrics: connection refused {NO_PORT}"
    )


def test_the_port_hint_names_the_default_port_of_the_scheme() -> None:
    assert port_hint("http://localhost:8000") == ""
    assert port_hint("localhost:80") == ""  # a port given, even 80: the user meant it
    assert port_hint("https://gw").startswith(" (no port given, so port 443; ")
    assert port_hint("https://gw").endswith("--url https://gw:8000)")
    assert port_hint("http://[::1]").endswith("--url [::1]:8000)")
    assert port_hint("http://[::1") == ""


def test_a_url_without_a_scheme_is_read_as_http() -> None:
    with PageServer(Script({"/metrics": Answer(IDLE)})) as srv:
        rc, out, err, _ = vtop("--url", f"127.0.0.1:{srv.port}", "--once")
    assert rc == 0, err
    (endpoint,) = json.loads(out)["endpoints"]
    assert endpoint["status"] == "ok" and endpoint["url"] == f"http://127.0.0.1:{srv.port}"


# -- (d) --help ----------------------------------------------------------------------------


def parsers() -> Iterator[argparse.ArgumentParser]:
    """Every parser a user can ask `--help` of: the monitor's, each command's, their own."""

    def walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in dict.fromkeys(action.choices.values()):
                    yield from walk(child)

    yield monitor_parser()
    for cmd in COMMANDS.values():
        yield from walk(cmd.parser())


def test_vtop_help_names_every_dispatched_sub_command() -> None:
    rc, out, _, _ = vtop("--help")
    assert rc == 0
    described = " ".join(out.split("\n\n")[1].split())  # the description, unwrapped
    for name in COMMANDS:
        assert re.search(rf"\b{name}\b", described), (name, described)
    assert "whatif" in described


def test_every_parser_ends_its_help_with_examples() -> None:
    progs = []
    for parser in parsers():
        progs.append(parser.prog)
        text = parser.format_help()
        assert "\nexamples:\n  vtop" in text, parser.prog
    assert sorted(progs) == sorted(EXAMPLES)  # no parser without, no examples of none


@pytest.mark.parametrize("line", [x for lines in EXAMPLES.values() for x in lines])
def test_every_example_is_a_command_line_vtop_accepts(line: str) -> None:
    words = shlex.split(command(line))
    assert words[0] == "vtop", line
    cmd = COMMANDS.get(words[1]) if len(words) > 1 else None
    parser = cmd.parser() if cmd is not None else monitor_parser()
    try:
        parser.parse_args(words[2:] if cmd is not None else words[1:])
    except SystemExit as exc:
        pytest.fail(f"{line!r} does not parse (exit {exc.code})")


@pytest.mark.parametrize("prog", sorted(EXAMPLES))
def test_the_real_help_shows_the_examples(prog: str) -> None:
    rc, out, err, _ = vtop(*prog.split()[1:], "--help")
    assert rc == 0, err
    assert out.rstrip("\n").endswith(EXAMPLES[prog][-1]), out


@pytest.mark.parametrize("cmd", ["check", "test"])
def test_rules_check_and_test_say_what_they_take(cmd: str) -> None:
    rc, out, _, _ = vtop("rules", cmd, "--help")
    assert rc == 0
    assert f"usage: vtop rules {cmd} [-h]" in out and "[FILE_OR_DIR ...]" in out
    (described,) = [line for line in out.splitlines() if line.startswith("  FILE_OR_DIR  ")]
    assert "a folder whose" in " ".join(out.split()) and "rule" in described


# -- (e) vtop sim --list -------------------------------------------------------------------


def test_sim_list_never_breaks_a_flag_at_its_hyphen() -> None:
    rc, out, _, _ = vtop("sim", "--list")
    assert rc == 0
    flags = {f for sc in SCENARIOS.values() for f in re.findall(r"--[a-z][a-z0-9-]*", sc.cause)}
    assert "--api-server-count" in flags  # the one that was cut
    for flag in flags:
        assert flag in out, flag
    assert not [line for line in out.splitlines() if line.endswith("-")]
