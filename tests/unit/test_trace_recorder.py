"""Recording a real server in a real subprocess: SIGKILL, SIGTERM/SIGHUP, a full disk, a size limit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from tests.tracegen import BusyEngine
from vtop.trace import TraceReader
from vtop.trace.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[PageServer]:
    engine = BusyEngine(seed=7, start=time.time())

    def page() -> Answer:
        engine.step()
        return Answer(engine.page().encode())

    script = Script(
        {
            "/metrics": page,
            "/version": Answer(b'{"version": "0.32.0"}'),
            "/v1/models": Answer(b'{"data": [{"id": "qwen", "max_model_len": 4096}]}'),
        }
    )
    with PageServer(script) as srv:
        yield srv


LIMITED = """
import resource, runpy, sys
limit = int(sys.argv.pop(1))
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.argv[0] = "vtop"
runpy.run_module("vtop", run_name="__main__")
"""


def start(*args: str, limit_bytes: int | None = None) -> subprocess.Popen[str]:
    """`python -m vtop ARGS`, optionally under a file-size limit (RLIMIT_FSIZE)."""
    cmd = [sys.executable, "-m", "vtop"]
    if limit_bytes is not None:
        cmd = [sys.executable, "-c", LIMITED, str(limit_bytes)]
    return subprocess.Popen(
        [*cmd, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def polls_in(path: Path) -> int:
    if not path.exists() or path.stat().st_size < 64:
        return 0
    try:
        with TraceReader(path, warn=lambda m: None) as r:
            return sum(1 for _ in r.times())
    except Exception:
        return 0


def wait_for_polls(
    path: Path, n: int, proc: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float = 30
) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = polls_in(path)
        if seen >= n:
            return seen
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} polls recorded in {timeout} s")


def test_sigkill_loses_at_most_the_last_second(server: PageServer, tmp_path: Path) -> None:
    path = tmp_path / "killed.vtrace"
    proc = start("--url", server.url, "--record", str(path), "--interval", "0.1")
    try:
        seen = wait_for_polls(path, 25, proc)
        time.sleep(1.0)  # ~10 more polls at 0.1 s; loaded CI machines poll late
        killed_at = time.time()
        proc.kill()
        proc.wait(10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.communicate()
    warnings: list[str] = []
    with TraceReader(path, warn=warnings.append) as r:
        frames = list(r.frames())
        assert not r.indexed  # no footer: the index was rebuilt by scanning
    assert len(warnings) <= 1
    assert len(frames) >= seen + 2
    assert frames[-1].t >= killed_at - 1.0
    assert all(f.scrapes[0].ok for f in frames)
    assert frames[0].scrapes[0].knobs is not None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signals_close_the_trace_cleanly(server: PageServer, tmp_path: Path, sig: int) -> None:
    path = tmp_path / "closed.vtrace"
    proc = start("--url", server.url, "--record", str(path), "--interval", "0.1")
    wait_for_polls(path, 5, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "recorded" in err and "Traceback" not in err
    with TraceReader(path, warn=pytest.fail) as r:
        assert r.indexed
        assert r.stats().polls >= 5
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_duration_ends_a_recording(server: PageServer, tmp_path: Path) -> None:
    path = tmp_path / "short.vtrace"
    proc = start(
        "--url", server.url, "--record", str(path), "--interval", "0.2", "--duration", "1s"
    )
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    with TraceReader(path) as r:
        assert r.indexed and 2 <= r.stats().polls <= 8  # 1 s at 0.2 s; fewer when loaded


def test_file_size_limit_stops_recording_but_not_the_report(
    server: PageServer, tmp_path: Path
) -> None:
    path = tmp_path / "limited.vtrace"
    proc = start(
        "--url",
        server.url,
        "--record",
        str(path),
        "--report",
        "--format",
        "json",
        "--interval",
        "0.05",
        "--duration",
        "4s",
        limit_bytes=5000,
    )
    out, err = proc.communicate(timeout=60)
    lines = [line for line in err.splitlines() if line and "too short" not in line]
    assert len(lines) == 1 and "recording stopped after" in lines[0], err
    assert "monitoring continues" in lines[0] and "Traceback" not in err
    doc = json.loads(out)
    # The report went on to its end: 4 s, too short for a verdict (UNKNOWN), not cut short.
    assert proc.returncode == 3 and "too short to rule anything out" in doc["reason"]
    assert doc["window"]["duration_s"] >= 3.5
    warnings: list[str] = []
    with TraceReader(path, warn=warnings.append) as r:
        recorded = r.stats().polls
    assert 10 < recorded < doc["window"]["polls"]  # monitoring went on after the recording
    assert path.stat().st_size <= 5000 and warnings == []


def test_full_disk_stops_a_headless_recording_with_one_message(
    server: PageServer, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    mnt = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
            capture_output=True,
            check=False,
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        path = mnt / "full.vtrace"
        proc = start("--url", server.url, "--record", str(path), "--interval", "0.02")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1
        lines = [line for line in err.splitlines() if line]
        assert len(lines) == 2 and "No space left on device" in lines[1], err
        with TraceReader(path, warn=pytest.fail) as r:
            assert r.stats().polls > 10
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_close_from_a_signal_handler_mid_write_waits_for_the_record(tmp_path: Path) -> None:
    from tests.tracegen import busy_frames

    frames = list(busy_frames(5))
    rec = Recorder(tmp_path / "a.vtrace")
    rec.feed(frames[0])
    real_write = rec._writer.write

    def interrupted(frame: object) -> int:
        rec.close()  # what a SIGTERM handler would do, arriving mid-write
        assert rec.active  # not closed yet: the record is being written
        return real_write(frame)  # type: ignore[arg-type]

    rec._writer.write = interrupted  # type: ignore[method-assign]
    rec.feed(frames[1])
    assert not rec.active
    rec.feed(frames[2])  # after close: ignored, no error
    with TraceReader(tmp_path / "a.vtrace", warn=pytest.fail) as r:
        assert r.indexed and r.stats().polls == 2


def test_without_a_terminal_a_recording_is_headless(server: PageServer, tmp_path: Path) -> None:
    """stdout a pipe (a script, cron, CI): no dashboard, one line saying what runs until when."""
    path = tmp_path / "piped.vtrace"
    proc = start("--url", server.url, "--record", str(path), "--interval", "0.1")
    wait_for_polls(path, 3, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and out == "", err
    assert err.splitlines()[0] == f"vtop: recording to {path} every 0.1 s until Ctrl-C"


def test_headless_records_without_the_dashboard_on_a_terminal(
    server: PageServer, tmp_path: Path
) -> None:
    """stdout and stderr a terminal (a pseudo-terminal here) and `--headless`: nothing drawn,
    only the recording's two lines (the dashboard would switch to the alternate screen)."""
    import pty

    path = tmp_path / "headless.vtrace"
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vtop", "--url", server.url, "--record", str(path),
         "--interval", "0.1", "--headless"],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
    )  # fmt: skip
    os.close(follower)
    shown = b""
    try:
        wait_for_polls(path, 3, proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the last writer is gone and all was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, shown
    with TraceReader(path, warn=pytest.fail) as r:
        assert r.indexed
        polls = r.stats().polls
    assert polls >= 3
    lines = shown.decode().splitlines()
    assert b"\x1b" not in shown, shown  # no escape sequence: no screen
    assert lines[0] == f"vtop: recording to {path} every 0.1 s until Ctrl-C"
    assert lines[-1].startswith(f"vtop: recorded {polls} polls (")


def test_headless_goes_with_record() -> None:
    result = subprocess.run([sys.executable, "-m", "vtop", "--demo", "--headless"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "vtop: --headless goes with --record FILE (it records without the dashboard)\n"
    )


@pytest.mark.parametrize(
    ("flags", "code"),
    [(["--record", "x.vtrace"], 2), (["--report"], 3), (["--replay", "x.vtrace"], 2)],
)
def test_once_does_not_silently_drop_another_mode(flags: list[str], code: int) -> None:
    result = subprocess.run([sys.executable, "-m", "vtop", "--demo", "--once", *flags], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert (result.returncode, result.stdout) == (code, "")
    assert result.stderr == (
        "vtop: --once prints one snapshot of a live or simulated server; it does not go with "
        "--report, --record or --replay\n"
    )
