"""`vtop tune` as a user runs it, against `vtop sim` in its own process.

Launched: `vtop tune --yes -- vtop sim … --max-num-seqs 16` starts the simulated server, sees
budget-too-small, restarts it with the twin's choice, measures it, logs both trials (JSON and
Markdown) and leaves the server running with the best flags. With `--restart` and
`--flags-file`: a plan the user declines restarts nothing and leaves the flags file as it was;
a yes writes the change into the file and runs the command.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vtop(*args: str, stdin: str = "", timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        input=stdin,
        text=True,
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def _kill(pid: int | None) -> None:
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)


@pytest.fixture
def sim() -> Iterator[int]:
    """A `vtop sim` of budget-too-small with 16 seats, on a free port."""
    port = free_port()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtop",
            "sim",
            "--scenario",
            "budget-too-small",
            "--port",
            str(port),
            "--max-num-seqs",
            "16",
        ],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(1.5)
    yield port
    _kill(p.pid)
    p.wait(10)


def test_a_launched_server_is_restarted_with_the_twins_choice_and_logged(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "tune.json"
    result = vtop(
        "tune",
        "--yes",
        "--watch",
        "25s",
        "--settle",
        "0s",
        "--max-restarts",
        "1",
        "--log",
        str(log),
        "--",
        sys.executable,
        "-m",
        "vtop",
        "sim",
        "--scenario",
        "budget-too-small",
        "--port",
        str(port),
        "--max-num-seqs",
        "16",
    )
    doc = json.loads(log.read_text())
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        first, second = doc["trials"]
        assert first["verdict"] == "WARNING budget-too-small" and first["changes"] == {}
        assert second["changes"]["max_num_seqs"] > 16, second
        assert second["measured"]["tokens_per_s"] > 1.3 * first["measured"]["tokens_per_s"]
        assert second["predicted"]["tokens_per_s"] and second["error"] is not None
        assert doc["best"] == 1 and doc["stopped"]
        table = log.with_suffix(".md").read_text()
        assert table.startswith("| # | flags | predicted tok/s | measured tok/s |")
        assert f"`--max-num-seqs {second['changes']['max_num_seqs']}`" in table
        out = result.stdout
        assert f"the server keeps running as PID {doc['server_pid']}" in out
        assert f"--max-num-seqs {second['changes']['max_num_seqs']}" in doc["server"]
        os.kill(doc["server_pid"], 0)  # still there, with the best flags
    finally:
        _kill(doc.get("server_pid"))


def test_a_declined_plan_restarts_nothing_and_a_yes_edits_the_flags_file(
    sim: int, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.write_text("# the unit runs: vllm serve MODEL $(cat flags)\n--max-num-seqs 16\n")
    marker = tmp_path / "restarted"
    restart = f"cat {flags} >> {marker}"
    common = (
        "tune",
        "--url",
        f"http://127.0.0.1:{sim}",
        "--restart",
        restart,
        "--flags-file",
        str(flags),
        "--watch",
        "25s",
        "--wait",
        "5s",
        "--settle",
        "0s",
    )
    no = vtop(*common, "--log", str(tmp_path / "no.json"), stdin="n\n")
    assert no.returncode == 0, no.stderr
    assert "budget-too-small: restart with --max-num-seqs " in no.stdout
    assert (
        "restart now? [y/N]" in no.stdout and "stopped: the restart was not confirmed" in no.stdout
    )
    assert not marker.exists() and "--max-num-seqs 16\n" in flags.read_text()
    # Yes: the file gets the new value and the command runs; but this command restarts
    # nothing, and the server's page still says 16 seats: tune says the flags were not applied
    # (not a measurement of 16 seats labelled 64) and puts the file back.
    yes = vtop(*common, "--yes", "--max-restarts", "3", "--log", str(tmp_path / "yes.json"))
    assert yes.returncode == 0, yes.stderr
    doc = json.loads((tmp_path / "yes.json").read_text())
    assert len(doc["trials"]) == 2, (doc["stopped"], [t.get("verdict") for t in doc["trials"]])
    assert "not applied: max_num_seqs 16, not " in doc["trials"][1]["note"], doc
    assert "the restart did not apply the flags" in doc["stopped"]
    asked = doc["trials"][1]["changes"]["max_num_seqs"]
    ran = marker.read_text().split("# the unit runs")
    assert f"--max-num-seqs {asked}\n" in ran[1] and "--max-num-seqs 16\n" in ran[2], ran
    assert (
        flags.read_text() == "# the unit runs: vllm serve MODEL $(cat flags)\n--max-num-seqs 16\n"
    )


def test_nothing_to_restart_is_one_line_and_a_usage_error() -> None:
    result = vtop("tune", "--url", "http://127.0.0.1:9")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "nothing vtop may restart" in result.stderr
