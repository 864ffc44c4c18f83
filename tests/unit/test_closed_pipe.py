"""A reader that goes away (`vtop rules list | head -1`) ends vtop quietly, as `git log | head`
ends git: no traceback, no "Exception ignored" line, no "internal error" line on stderr.

The real `vtop` program runs in a subprocess whose stdout is a pipe the test closes before
vtop writes a byte, so every command meets the closed pipe on its first write, however small
its output (with `head -1` a short output may fit the pipe before head exits, and the test
could not fail). A document written whole (`--report`, `trace list`) goes through
`write_stdout` and keeps the command's own exit code; one written in pieces (`print`) ends in
`vtop.cli.dispatch.main` with 141, 128 + SIGPIPE.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vtop.exits import ExitCode

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(sys.executable).with_name("vtop")
"""The console script pip installed beside this interpreter: the program a user runs."""


def run_into_closed_pipe(*args: str) -> tuple[int, str]:
    """`vtop ARGS` with a stdout nobody reads (closed before it starts); (exit code, stderr)."""
    cmd = [str(PROGRAM)] if PROGRAM.is_file() else [sys.executable, "-m", "vtop"]
    with subprocess.Popen(
        [*cmd, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "VTOP_DEBUG": ""},
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first write
        err = proc.stderr.read().decode("utf-8", "replace")
        return proc.wait(timeout=120), err


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("rules", "list"), ExitCode.PIPE),
        (("sim", "--list"), ExitCode.PIPE),
        (("--replay", "memory-ceiling", "--train"), ExitCode.PIPE),
        (("trace", "list"), ExitCode.OK),
        (("--replay", "memory-ceiling", "--report"), ExitCode.CRITICAL),  # its verdict
    ],
    ids=["rules list", "sim --list", "--train", "trace list", "--report"],
)
def test_a_reader_that_went_away_ends_vtop_quietly(args: tuple[str, ...], code: int) -> None:
    got, err = run_into_closed_pipe(*args)
    assert err == ""
    assert got == code


def test_the_pipe_code_is_what_a_shell_reports_for_sigpipe() -> None:
    assert ExitCode.PIPE == 128 + signal.SIGPIPE
