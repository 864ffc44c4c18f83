"""Fixtures shared by the hardening tests: the real `vtop` command, in a pipe or in a real
terminal, and a real vLLM on loopback.

The hardening tests prove each fault end to end, where a user meets it, so most of them run
vtop as a user does (`python -m vtop ...`, the worktree's code first on the path) against a
`PageServer` that serves pages captured from a real vLLM 0.32 server
(`tests/fixtures/metrics/vllm-0.32`). What reaches a terminal is judged on a real one: a
detached tmux pane whose every byte is logged (`tmux pipe-pane` sees exactly what the program
writes to its pty), and on what Textual would write (`terminal`) under Pilot. Everything
specific to a fault stays in its test file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from tests.host_tools import require
from tests.pageserver import Answer, Script
from tests.ui.screen_text import terminal_bytes

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32"
SERIES = tuple(sorted((REAL / "kv-exhausted-series").glob("[0-9][0-9].txt")))
"""Ten consecutive pages of a real server, one second apart, every counter rising."""


def vtop_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment, with this worktree's `vtop` first and no inherited secret."""
    env = {k: v for k, v in os.environ.items() if k != "VTOP_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def vtop_argv(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "vtop", *args]


def vllm_script(pages: Sequence[Path] = SERIES) -> Script:
    """A real server's answers: /metrics steps through `pages` (the last repeats), /version
    and /v1/models as the same server gave them."""
    bodies = [p.read_bytes() for p in pages]
    polls = count()

    def metrics() -> Answer:
        return Answer(bodies[min(next(polls), len(bodies) - 1)])

    return Script(
        {
            "/metrics": metrics,
            "/version": Answer((REAL / "version.json").read_bytes()),
            "/v1/models": Answer((REAL / "models.json").read_bytes()),
        }
    )


@pytest.fixture
def real_vllm() -> Callable[..., Script]:
    """`real_vllm(pages=SERIES)`: a fresh script of a real server's answers (`vllm_script`)."""
    return vllm_script


@pytest.fixture
def vtop_process() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `vtop ARGS...` in the background (pipes for stdout and stderr); `env=` adds
    variables. Whatever is still running when the test ends is killed."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(vtop_argv(args), cwd=ROOT, env=vtop_env(env), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass
class Pane:
    """vtop in a detached tmux pane (a real terminal); `written()` is every byte it wrote."""

    socket: str
    log: Path
    rc: Path

    def tmux(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, "-f", os.devnull, *args],
                             capture_output=True, text=True, check=check, env=vtop_env())  # fmt: skip
        return out.stdout

    def screen(self) -> str:
        """What the terminal shows now, as plain text (one line per row)."""
        return self.tmux("capture-pane", "-p", "-t", "vtop")

    def written(self) -> bytes:
        return self.log.read_bytes() if self.log.exists() else b""

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "vtop", *keys)

    def show(self, fmt: str) -> str:
        """A tmux format of the pane: `#{pane_title}`..."""
        return self.tmux("display-message", "-p", "-t", "vtop", fmt).strip()

    def wait_exit(self, timeout: float = 10.0) -> int:
        """vtop's exit status, as the pane's shell wrote it. (Not tmux's `pane_dead_status`:
        tmux 3.3 at times leaves the exited process a zombie, its status unknown, for long.)"""
        deadline = time.monotonic() + timeout
        while not self.rc.exists() or not self.rc.read_text().strip():
            if time.monotonic() > deadline:
                raise AssertionError(f"vtop did not exit; the screen:\n{self.screen()}")
            time.sleep(0.05)
        return int(self.rc.read_text())


@pytest.fixture
def tmux_vtop(tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    """`tmux_vtop(*args, env=None, size=(80, 24), cwd=ROOT)`: the dashboard in a real terminal
    (vtop's own code comes from PYTHONPATH, whatever the working directory).

    The pane's shell waits for a key before it runs vtop, so the byte log is attached before
    vtop writes its first byte, and writes vtop's exit status when it ends; `set-clipboard on`
    lets an OSC 52 reach tmux's buffers, which stay there to be checked after vtop has quit."""
    require("tmux", why="runs vtop in a real terminal")
    panes: list[Pane] = []

    def start(*args: str, env: dict[str, str] | None = None, size: tuple[int, int] = (80, 24),
              cwd: Path = ROOT) -> Pane:  # fmt: skip
        base = tmp_path / f"pane{len(panes)}"
        pane = Pane(f"vtop-hardening-{uuid.uuid4().hex[:8]}", base.with_suffix(".out"),
                    base.with_suffix(".rc"))  # fmt: skip
        panes.append(pane)
        extra = [arg for k, v in (env or {}).items() for arg in ("-e", f"{k}={v}")]
        command = (f"read go; cd {shlex.quote(str(cwd))} && {shlex.join(vtop_argv(args))}; "
                   f"echo $? > {shlex.quote(str(pane.rc))}")  # fmt: skip
        pane.tmux("new-session", "-d", "-s", "vtop", "-x", str(size[0]), "-y", str(size[1]),
                  *extra, command)  # fmt: skip
        pane.tmux("set-option", "-g", "set-clipboard", "on")
        pane.tmux("set-option", "-g", "remain-on-exit", "on")  # the pane (and tmux) stay
        pane.tmux("pipe-pane", "-t", "vtop", "-o", f"cat > {shlex.quote(str(pane.log))}")
        pane.keys("Enter")
        return pane

    yield start
    for pane in panes:
        pane.tmux("kill-server", check=False)


@pytest.fixture
def terminal() -> Callable[[App[Any]], str]:
    """`terminal(app)`: everything Textual would write to the terminal to draw the app's screen
    (and the screens under a modal one) from scratch: the bytes a terminal gets, escape
    sequences included (`tests.ui.screen_text.terminal_bytes`)."""
    return terminal_bytes
