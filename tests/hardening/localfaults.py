"""Helpers for the local-fault hardening tests: the GPU, files, and the terminal.

Every test here meets a fault where a user would: the command line (`python -m vtop` in a
subprocess, or `vtop.cli.main` in-process when a fake must sit under it), the dashboard, or a
real terminal. So the helpers are ways of *running vtop*, not ways around it:

- `run_cli_tui` runs `vtop.cli.main(argv)` exactly as the console script does, except that the
  one `App.run()` it reaches is replaced by Textual's `run_test()` under Pilot: argument
  parsing, the sources, the engine and the app are the CLI's own, and the test drives the
  screen the user would see. In-process, so the fake NVML (`tests/fakes/nvml.py`) is under it.
- `Tmux` is a private tmux server (`-L`, no config) with one pane running a command in a real
  pseudo-terminal, for signals and resizes that Pilot cannot fake. The command runs under a
  small wrapper that writes its pid and exit status to files: a pane closed with `kill-pane`
  takes its exit status with it.
- `FullDisk` is a directory that really runs out of space: a tmpfs of a few pages, filled to
  leave `free` bytes. Mounting needs root and a capability some containers lack; there, and
  only there, the same fault is injected at the lowest layer vtop writes through (`os.write`
  answering ENOSPC once the directory's quota is spent), in-process or through `vtop_argv`'s
  launcher in a subprocess. Both say and leave the same things, so the tests assert the same.
- `records` walks a trace's framing (`vtop.trace.wire`) so a test damages a chosen record and
  knows exactly how many polls must survive.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.host_tools import require

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_TRACE = ROOT / "traces" / "budget-too-small.vtrace"
"""Recorded by vtop from the simulator: 15 minutes, 901 polls, four keyframes, a footer."""


def env(**extra: str) -> dict[str, str]:
    """The environment for a vtop subprocess: this checkout's `vtop` first, no colour noise."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), out.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out.pop("VTOP_API_KEY", None)
    out.update(extra)
    return out


def vtop(
    *args: str, cwd: Path = ROOT, timeout: float = 60.0, quota: FullDisk | None = None
) -> subprocess.CompletedProcess[str]:
    """`vtop ARGS` in a subprocess, as a user runs it (under `quota`'s fault if it injects)."""
    return subprocess.run(
        vtop_argv(*args, quota=quota),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
        env=env(),
    )


def stderr_lines(text: str) -> list[str]:
    """The non-empty lines of a stderr, after checking no traceback is among them."""
    assert "Traceback" not in text, text
    return [line for line in text.splitlines() if line.strip()]


def one_line(text: str) -> str:
    """The single line a fault must produce (and proof there is exactly one)."""
    lines = stderr_lines(text)
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{text}"
    return lines[0]


# -- the dashboard, driven by Pilot through the CLI ---------------------------------------------

Drive = Callable[[Any, Any], Awaitable[None]]
"""`async def drive(app, pilot)`: what the user does and sees while the app runs."""


def run_cli_tui(
    argv: Sequence[str],
    drive: Drive,
    *,
    size: tuple[int, int] = (120, 40),
    tty: bool = True,
) -> tuple[int, Any]:
    """`vtop ARGV` through `vtop.cli.main`, its screen run under Pilot; (exit code, app).

    The app is None when the CLI never got as far as a screen (a usage error, an unreadable
    trace). `tty` is what `sys.stdout.isatty()` answers, which picks the replay screen."""
    from textual.app import App

    from vtop import cli

    seen: list[Any] = []
    original = App.run

    def run_under_pilot(self: Any, *args: object, **kwargs: object) -> None:
        seen.append(self)

        async def go() -> None:
            async with self.run_test(size=size) as pilot:
                await pilot.pause()
                await drive(self, pilot)

        asyncio.run(go())

    isatty = sys.stdout.isatty
    App.run = run_under_pilot  # type: ignore[method-assign]
    sys.stdout.isatty = lambda: tty  # type: ignore[method-assign]
    try:
        code = cli.main(list(argv))
    finally:
        App.run = original  # type: ignore[method-assign]
        sys.stdout.isatty = isatty  # type: ignore[method-assign]
    return code, (seen[0] if seen else None)


async def until(
    pilot: Any, condition: Callable[[], bool], timeout: float = 15.0, what: str = "the condition"
) -> None:
    """Let the app run until `condition()` holds (polls arrive on their own timer)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.05)


def notifications(app: Any) -> list[str]:
    """The text of every notification the app has on screen."""
    return [str(n.message) for n in app._notifications]


# -- a real terminal ------------------------------------------------------------------------------

WRAPPER = """
import os, signal, subprocess, sys
base = sys.argv[1]
no_sighup = os.environ.pop("VTOP_TEST_NO_SIGHUP", "") == "1"
if no_sighup:  # vtop starts with SIGHUP ignored: only the terminal's hangup itself tells
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
child = subprocess.Popen(sys.argv[2:])
# A hangup reaches the pane's first process only; pass it on and stay to write the status,
# as a login shell passes it on to its jobs.
if not no_sighup:
    signal.signal(signal.SIGHUP, lambda *_: child.send_signal(signal.SIGHUP))
with open(base + ".pid", "w") as fh:
    fh.write(str(child.pid))
code = child.wait()
with open(base + ".rc", "w") as fh:
    fh.write(str(code))
"""


class Tmux:
    """A private tmux server with one pane; `kill()` (or the context manager) ends it."""

    def __init__(self, workdir: Path, *, size: tuple[int, int] = (80, 24)) -> None:
        require("tmux", why="runs vtop in a real terminal")
        self.workdir = workdir
        self.size = size
        self.socket = f"vtop-hl-{uuid.uuid4().hex[:10]}"
        self.base = workdir / f"pane-{uuid.uuid4().hex[:6]}"
        self.socket_path: Path | None = None

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def tmux(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env=env(TERM="xterm-256color"),
        )
        if check and result.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def start(self, *vtop_args: str, sighup: bool = True) -> int:
        """Run `vtop ARGS` in a fresh pane; returns vtop's pid once it runs. With
        `sighup=False`, vtop runs with SIGHUP ignored and none is passed on to it."""
        argv = [
            sys.executable,
            "-c",
            WRAPPER,
            str(self.base),
            sys.executable,
            "-m",
            "vtop",
            *vtop_args,
        ]
        command = "exec " + shlex.join(argv)
        w, h = self.size
        extra = [] if sighup else ["-e", "VTOP_TEST_NO_SIGHUP=1"]
        self.tmux(
            "new-session",
            "-d",
            "-x",
            str(w),
            "-y",
            str(h),
            "-s",
            "main",
            "-c",
            str(self.workdir),
            *extra,
            command,
        )
        self.tmux("set-option", "-t", "main", "remain-on-exit", "on")
        self.socket_path = Path(self.value("#{socket_path}"))
        pid_file = self.base.with_suffix(".pid")
        deadline = time.monotonic() + 15
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "vtop never started in the pane"
            time.sleep(0.05)
        return int(pid_file.read_text())

    def capture(self) -> list[str]:
        """The pane's screen, one string per row (trailing spaces kept off)."""
        return [row.rstrip() for row in self.tmux("capture-pane", "-p", "-t", "main").split("\n")][
            : self.pane_size()[1]
        ]

    def pane_size(self) -> tuple[int, int]:
        w, h = self.tmux(
            "display-message", "-p", "-t", "main", "#{pane_width} #{pane_height}"
        ).split()
        return int(w), int(h)

    def value(self, fmt: str) -> str:
        return self.tmux("display-message", "-p", "-t", "main", fmt).strip()

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def resize(self, *sizes: tuple[int, int]) -> None:
        """Resize the window to each size in turn, in one tmux command: a burst a few
        microseconds apart, faster than any drag, so the app sees them pile up."""
        args: list[str] = []
        for width, height in sizes:
            args += [";"] if args else []
            args += ["resize-window", "-t", "main", "-x", str(width), "-y", str(height)]
        self.tmux(*args)

    def close_pane(self) -> None:
        """What closing the terminal window does: the pty hangs up (SIGHUP to the pane)."""
        self.tmux("kill-pane", "-t", "main")

    def wait_screen(
        self,
        condition: Callable[[list[str]], bool],
        timeout: float = 20.0,
        what: str = "the screen",
    ) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.capture()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(screen))
            time.sleep(0.1)

    def exit_code(self, timeout: float = 20.0) -> int:
        """vtop's exit status, once it has exited."""
        rc_file = self.base.with_suffix(".rc")
        deadline = time.monotonic() + timeout
        while not rc_file.exists() or not rc_file.read_text():
            assert time.monotonic() < deadline, "vtop did not exit"
            time.sleep(0.05)
        return int(rc_file.read_text())

    def kill(self) -> None:
        """End the tmux server (its socket file too), and vtop if it still runs (a test
        that failed midway)."""
        self.tmux("kill-server", check=False)
        if self.socket_path is not None:
            self.socket_path.unlink(missing_ok=True)
        pid_file = self.base.with_suffix(".pid")
        if pid_file.exists() and pid_file.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- a full disk ---------------------------------------------------------------------------------

LAUNCHER = """
import sys
from tests.hardening.localfaults import inject_quota
inject_quota(sys.argv.pop(1), int(sys.argv.pop(1)))
from vtop.cli import main
sys.exit(main(sys.argv[1:]))
"""


@dataclass
class FullDisk:
    """A directory with `free` bytes left: a real tmpfs, or (where mounting is refused) the
    same fault injected under vtop's writes. `real` says which."""

    dir: Path
    free: int
    real: bool


FILLER = ".filler"


@contextlib.contextmanager
def full_disk(base: Path, free: int) -> Iterator[FullDisk]:
    """A directory under `base` on which writes fail with ENOSPC after about `free` bytes."""
    mnt = base / f"disk-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    mounted = (
        shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=128k,mode=0700", "tmpfs", str(mnt)],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    try:
        if mounted:
            _fill(mnt / FILLER, free)
        yield FullDisk(mnt, free, mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


def _fill(filler: Path, leave: int) -> None:
    """Fill the filesystem, then give back `leave` bytes (whole pages, as tmpfs counts)."""
    with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):
        while fh.write(b"\0" * 4096):
            pass
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))


def vtop_argv(*args: str, quota: FullDisk | None = None) -> list[str]:
    """The command line that runs `vtop ARGS`, through the launcher when a quota is injected."""
    if quota is None or quota.real:
        return [sys.executable, "-m", "vtop", *args]
    return [sys.executable, "-c", LAUNCHER, str(quota.dir), str(quota.free), *args]


def quota_write(directory: str, free: int) -> Callable[[int, Any], int]:
    """An `os.write` under which files in `directory` fail with ENOSPC once `free` bytes are
    spent, as a full filesystem does (a short write first, then the error)."""
    real_write = os.write
    root = os.path.realpath(directory)
    spent = [0]

    def write(fd: int, data: Any) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if not target.startswith(root + os.sep):
            return real_write(fd, data)
        left = free - spent[0]
        if left <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(memoryview(data)[:left]))
        spent[0] += n
        return n

    return write


def inject_quota(directory: str, free: int) -> None:
    """For the launcher: this process's writes under `directory` run out after `free` bytes."""
    os.write = quota_write(directory, free)


# -- trace framing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    kind: int
    offset: int
    end: int


def records(data: bytes) -> list[Record]:
    """Every record of a sound trace, in file order."""
    from vtop.trace import wire

    out = []
    pos = wire.PREAMBLE.size
    while pos < len(data):
        kind, length, _crc = wire.RECORD.unpack_from(data, pos)
        end = pos + wire.RECORD.size + length
        out.append(Record(kind, pos, end))
        pos = end
    assert pos == len(data)
    return out


def polls(recs: Sequence[Record]) -> list[Record]:
    """The records that each hold one poll (keyframes and deltas)."""
    from vtop.trace import wire

    return [r for r in recs if r.kind in (wire.KEYFRAME, wire.DELTA)]


def judged(code: int | None, out: str) -> bool:
    """A report that read the server: a verdict (exit 0-2), or none yet (exit 3, the report
    saying what a warning still being judged waits for, or that its polls spanned too little
    to judge: which of the two a sub-second window gets depends on when its polls landed on a
    busy host), never a failure to read (no metrics, an endpoint that could not be read)."""
    return code in (0, 1, 2) or (code == 3 and "no verdict" in out)
