"""Files vtop writes and reads: `-o` never replaces an input, writes are whole or not at all,
inputs that are not regular files are refused, and an unexpected error is one line, exit 3."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from vtop import files

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "underloaded.vtrace"


def vtop(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env={**os.environ, "VTOP_DEBUG": "", **(env or {})},
    )


# -- -o that names an input ---------------------------------------------------------------------


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "incident.vtrace"
    shutil.copyfile(TRACE, path)
    return path


def test_o_naming_the_replayed_trace_is_refused_and_the_trace_kept(
    trace: Path, tmp_path: Path
) -> None:
    before = trace.read_bytes()
    link = tmp_path / "link.vtrace"
    link.symlink_to(trace)
    for out in (str(trace), str(link), f"{tmp_path}/./{trace.name}"):
        result = vtop("--replay", str(trace), "--report", "-o", out)
        assert result.returncode == 3  # a usage error under --report is UNKNOWN
        assert result.stderr == (
            f"vtop: -o {out} names the trace being replayed ({trace}); write the output to "
            "another file\n"
        )
        assert result.stdout == ""
    assert trace.read_bytes() == before


def test_o_naming_a_rules_file_or_a_targets_file_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    mine = rules / "mine.yaml"
    mine.write_text("rules: []\n")
    targets = tmp_path / "fleet.txt"
    targets.write_text("http://127.0.0.1:9/\n")
    result = vtop("--demo", "--report", "--rules", str(rules), "-o", str(mine))
    assert result.returncode == 3
    assert result.stderr == (
        f"vtop: -o {mine} names a rules file ({mine}); write the output to another file\n"
    )
    assert mine.read_text() == "rules: []\n"
    result = vtop("--targets", str(targets), "--report", "-o", str(targets))
    assert result.returncode == 3 and "names a targets file" in result.stderr
    assert targets.read_text() == "http://127.0.0.1:9/\n"
    result = vtop("rules", "export", "--rules", str(rules), "-o", str(mine))
    assert result.returncode == 2 and "names a rules file" in result.stderr
    assert mine.read_text() == "rules: []\n"


def test_o_naming_the_ca_certificates_is_refused(tmp_path: Path) -> None:
    """--ca-cert is read before the report runs; -o naming it would replace the user's CA."""
    from tests.certs import make_private_ca

    ca = make_private_ca(tmp_path).ca
    before = ca.read_bytes()
    result = vtop(
        "--url",
        "https://127.0.0.1:9/",
        "--ca-cert",
        str(ca),
        "--report",
        "--duration",
        "1",
        "-o",
        str(ca),
    )
    assert result.returncode == 3
    assert result.stderr == (
        f"vtop: -o {ca} names the CA certificates of --ca-cert ({ca}); write the output to "
        "another file\n"
    )
    assert ca.read_bytes() == before


def test_o_naming_the_trace_being_recorded_is_refused_before_it_exists(tmp_path: Path) -> None:
    path = tmp_path / "new.vtrace"
    result = vtop("--demo", "--report", "--record", str(path), "-o", str(path))
    assert result.returncode == 3 and "names the trace being recorded" in result.stderr
    assert not path.exists()


def test_a_report_replaces_its_output_whole_keeping_its_mode(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    out.write_text("old report\n")
    out.chmod(0o640)
    result = vtop("--replay", str(trace), "--report", "--format", "markdown", "-o", str(out))
    assert result.returncode in (0, 1, 2), result.stderr
    assert out.read_text().startswith("#")
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["incident.vtrace", "report.md"]


# -- the atomic write itself --------------------------------------------------------------------


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills after a few bytes (as `tests/hardening` injects it: short writes,
    then ENOSPC): the target keeps its old content, the temporary file is removed."""
    target = tmp_path / "report.html"
    target.write_text("the good old report\n")
    real_write, spent = os.write, [0]

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            return real_write(fd, data)
        if spent[0] >= 100:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(memoryview(data)[: 100 - spent[0]]))
        spent[0] += n
        return n

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        files.write_atomic(target, "x" * 10_000)
    monkeypatch.undo()
    assert target.read_text() == "the good old report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_new_file_gets_the_umask_mode_and_a_device_is_written_in_place(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        files.write_atomic(tmp_path / "new.txt", "hello")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    files.write_atomic("/dev/null", "into the void")  # not replaced by a regular file
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "new.txt")
    files.write_atomic(link, "through the link")
    assert link.is_symlink() and (tmp_path / "new.txt").read_text() == "through the link"


def test_o_dev_stdout_feeds_a_pipe_and_appends_where_the_shell_appends(
    trace: Path, tmp_path: Path
) -> None:
    """`-o /dev/stdout` names the descriptor, not a file to replace: a pipe gets the report
    (renaming beside a pipe cannot work), and a shell's `>>` keeps what the file held."""
    args = ("--replay", str(trace), "--report", "--format", "json", "-o", "/dev/stdout")
    result = vtop(*args)  # stdout is a pipe
    assert result.returncode in (0, 1, 2), result.stderr
    assert json.loads(result.stdout)["window"]["polls"] > 0
    log = tmp_path / "reports.log"
    log.write_text("yesterday's report\n")
    inode = log.stat().st_ino
    with log.open("a") as appended:
        code = subprocess.run(
            [sys.executable, "-m", "vtop", *args],
            stdout=appended,
            cwd=ROOT,
            timeout=120,
            check=False,
        ).returncode
    assert code in (0, 1, 2)
    text = log.read_text()
    assert text.startswith("yesterday's report\n{") and json.loads(text.split("\n", 1)[1])
    assert log.stat().st_ino == inode, "fed through the descriptor, not replaced by a rename"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["incident.vtrace", "reports.log"]


def test_every_file_vtop_writes_goes_through_the_atomic_helper() -> None:
    """A plain open for writing (or write_text) in vtop/ would be a write a full disk can cut
    in half; only the helper itself, the trace writer (append-only, O_EXCL), the output
    streams' /dev/null and the log a server `vtop tune` launched appends its output to (the
    server writes it, as a shell's `>>` would) may open files for writing."""
    allowed = {"files.py", "writer.py", "output.py", "tune/server.py"}
    writes = re.compile(r"""open\([^)]*["'][wax]b?\+?["']|\.write_(text|bytes)\(|O_WRONLY""")
    offenders = [
        f"{src.relative_to(ROOT)}:{n}: {line.strip()}"
        for src in (ROOT / "vtop").rglob("*.py")
        if src.name not in allowed and f"{src.parent.name}/{src.name}" not in allowed
        for n, line in enumerate(src.read_text().splitlines(), 1)
        if writes.search(line)
    ]
    assert offenders == []
    planted = 'with open(path, "w") as fh:'
    assert writes.search(planted)


# -- inputs that are not files ------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_fifos_among_the_inputs_are_refused_in_one_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    os.mkfifo(rules / "blocked.yaml")
    with pytest.raises(files.NotRegularFile, match="is a FIFO, not a regular file"):
        files.open_regular(rules / "blocked.yaml")
    result = vtop("--demo", "--report", "--duration", "2m", "--rules", str(rules))
    assert result.returncode in (0, 1, 2, 3)
    skipped = [line for line in result.stderr.splitlines() if "blocked.yaml" in line]
    assert skipped == [
        f"vtop: rule skipped: {rules}/blocked.yaml:0: -: cannot read: it is a FIFO, not a "
        "regular file"
    ]
    result = vtop("rules", "check", str(rules))
    assert "cannot read: it is a FIFO, not a regular file" in result.stderr + result.stdout
    targets = tmp_path / "fleet.txt"
    os.mkfifo(targets)
    result = vtop("--targets", str(targets), "--report")
    assert result.returncode == 3
    assert result.stderr == (
        f"vtop: {targets}: cannot read the targets file: it is a FIFO, not a regular file\n"
    )


# -- report mode: an unexpected error is UNKNOWN, in one line ----------------------------------

BOOM = """
import sys
import vtop.report.run as run
def boom(*args, **kwargs):
    raise RuntimeError("no code expected this\\x1b[2J")
run.replay_document = boom
from vtop.cli import dispatch
sys.exit(dispatch.main(sys.argv[1:]))
"""


def test_an_unexpected_error_in_a_report_is_one_line_and_unknown(trace: Path) -> None:
    """The error is planted (no real input still reaches one: the fuzz suite looks), the
    dispatcher is real: exit 3, not a traceback's 1 that reads as WARNING."""
    argv = [sys.executable, "-c", BOOM, "--replay", str(trace), "--report"]
    env = {**os.environ, "VTOP_DEBUG": ""}
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert result.returncode == 3
    assert result.stderr == (
        "vtop: internal error, no verdict: RuntimeError: no code expected this [2J "
        "(VTOP_DEBUG=1 shows the traceback)\n"
    )
    env["VTOP_DEBUG"] = "1"
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert result.returncode == 1 and "Traceback" in result.stderr
    assert "RuntimeError: no code expected this" in result.stderr
