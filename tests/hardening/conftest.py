"""Fixtures shared by the hardening tests: the real `vtop` command, and a real vLLM on loopback.

The hardening tests prove each fault end to end, where a user meets it, so most of them run
vtop as a user does (`python -m vtop ...`, the worktree's code first on the path) against a
`PageServer` that serves pages captured from a real vLLM 0.32 server
(`tests/fixtures/metrics/vllm-0.32`). These fixtures are the two halves; everything specific
to a fault stays in its test file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from itertools import count
from pathlib import Path

import pytest

from tests.pageserver import Answer, Script

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32"
SERIES = tuple(sorted((REAL / "kv-exhausted-series").glob("[0-9][0-9].txt")))
"""Ten consecutive pages of a real server, one second apart, every counter rising."""

VtopRun = Callable[..., subprocess.CompletedProcess[str]]


def vtop_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment, with this worktree's `vtop` first and no inherited secret."""
    env = {k: v for k, v in os.environ.items() if k != "VTOP_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def vtop_argv(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "vtop", *args]


@pytest.fixture
def vtop() -> VtopRun:
    """Run `vtop ARGS...` to completion; `env=` adds variables (VTOP_API_KEY)."""

    def run(
        *args: str, env: dict[str, str] | None = None, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            vtop_argv(args),
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout,
            check=False,
            env=vtop_env(env),
        )

    return run


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
