"""The shipped traces by name, wherever vtop is installed: the resolver (`vtop.cli.shipped_traces`),
`vtop trace list`, and `vtop --replay memory-ceiling --report` run from a folder that is not
the checkout (scripts/check_wheel.sh does the same from the installed wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from vtop.cli import shipped_traces as shipped
from vtop.trace import TraceError

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(p.stem for p in (ROOT / "traces").glob("*.vtrace"))


def vtop(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


def packaged() -> Path:
    """Where an installed vtop keeps its traces, as importlib.resources finds them: the wheel's
    vtop/_traces, or the checkout's traces/ (an editable install has no vtop/_traces)."""
    folder = resources.files("vtop") / "_traces"
    return Path(str(folder)) if folder.is_dir() else ROOT / "traces"


def test_the_wheel_maps_traces_into_the_package_as_it_maps_rules() -> None:
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    wheel = wheel["targets"]["wheel"]
    assert wheel["sources"]["traces"] == "vtop/_traces"
    assert wheel["sources"]["rules"] == "vtop/_rules"
    assert "traces" in wheel["only-include"]
    assert {"traces/*.py", "traces/*.md"} <= set(wheel["exclude"])  # the recordings only


@pytest.mark.parametrize("typed", ["memory-ceiling", "memory-ceiling.vtrace"])
def test_a_name_resolves_to_the_packaged_trace(
    typed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no such file here
    assert Path(shipped.resolve(typed)).samefile(packaged() / "memory-ceiling.vtrace")
    assert sorted(shipped.shipped()) == NAMES


def test_an_existing_path_always_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for typed in ("memory-ceiling", "memory-ceiling.vtrace"):
        (tmp_path / typed).write_text("mine")
        assert shipped.resolve(typed) == typed
    assert shipped.resolve(str(tmp_path / "memory-ceiling")) == str(tmp_path / "memory-ceiling")
    (tmp_path / "healthy").mkdir()  # even a folder: the reader says it is no trace
    assert shipped.resolve("healthy") == "healthy"


def test_the_shipped_folder_is_the_one_given(tmp_path: Path) -> None:
    (tmp_path / "a.vtrace").write_bytes(b"x")
    (tmp_path / "README.md").write_text("not a trace")
    assert shipped.shipped(tmp_path) == {"a": tmp_path / "a.vtrace"}
    assert shipped.resolve("a", folder=tmp_path) == str(tmp_path / "a.vtrace")
    with pytest.raises(TraceError, match=r"this vtop ships none"):
        shipped.resolve("a", folder=tmp_path / "missing")


def test_an_unknown_name_is_one_line_naming_the_traces_there_are() -> None:
    with pytest.raises(TraceError) as err:
        shipped.resolve("no-such-incident")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("no trace no-such-incident: no such file, nor a shipped trace")
    assert all(name in message for name in NAMES) and "vtop trace list" in message


def test_a_near_miss_names_the_trace_meant() -> None:
    with pytest.raises(TraceError, match=r"did you mean memory-ceiling\?"):
        shipped.resolve("memory-celing")


def test_a_missing_path_says_the_shipped_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the README's old `--replay traces/memory-ceiling.vtrace`
    with pytest.raises(TraceError) as err:
        shipped.resolve("traces/memory-ceiling.vtrace")
    assert str(err.value) == (
        "cannot open traces/memory-ceiling.vtrace: No such file or directory; "
        "vtop ships a trace by that name: `memory-ceiling`"
    )


def test_trace_list_shows_every_shipped_trace_within_80_columns(tmp_path: Path) -> None:
    result = vtop("trace", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "LENGTH", "SERVERS", "VLLM", "WHAT", "IT", "SHOWS"]
    assert max(map(len, lines)) <= 80
    assert [line.split()[0] for line in lines[1:] if not line.startswith(" ")] == NAMES
    at = next(i for i, line in enumerate(lines) if line.startswith("memory-ceiling "))
    assert lines[at].split()[1:5] == ["15m", "02s", "1", "0.32.0"]
    shows = " ".join(line[52:] for line in lines[at : at + 2])  # wrapped in its column
    assert shows.startswith("The KV pool, not the scheduler, is the wall")  # the scenario's title
    (real,) = [line for line in lines if line.startswith("vllm-cpu-kv-exhaustion ")]
    assert "recorded live from" in real


def test_trace_list_adds_the_current_folders_traces(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    shutil.copy(ROOT / "traces" / "healthy.vtrace", tmp_path / "traces" / "mine.vtrace")
    (tmp_path / "traces" / "torn.vtrace").write_bytes(b"VTRC")
    result = vtop("trace", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    names = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    assert names == [*NAMES, "traces/mine.vtrace", "traces/torn.vtrace"]  # as --replay takes
    (torn,) = [line for line in lines if line.startswith("traces/torn.vtrace")]
    assert "cannot be read" in torn


def test_trace_list_in_a_checkout_lists_its_traces_once() -> None:
    result = vtop("trace", "list", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert not [line for line in result.stdout.splitlines() if line.startswith("traces/")]


def test_replay_by_name_reports_from_any_folder(tmp_path: Path) -> None:
    result = vtop("--replay", "memory-ceiling", "--report", cwd=tmp_path)
    assert result.returncode == 2, result.stderr  # CRITICAL
    assert result.stdout.startswith("vtop report: CRITICAL (memory-ceiling on sim://memory-ceiling")
    assert "replay memory-ceiling.vtrace" in result.stdout


def test_replay_of_an_unknown_name_is_one_line_and_unknown(tmp_path: Path) -> None:
    result = vtop("--replay", "nope", "--report", cwd=tmp_path)
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("vtop: no trace nope: no such file, nor a shipped trace;")
    assert "memory-ceiling" in result.stderr


def test_replay_of_a_file_named_like_a_shipped_trace_reads_the_file(tmp_path: Path) -> None:
    (tmp_path / "memory-ceiling").write_text("my notes")
    result = vtop("--replay", "memory-ceiling", "--report", cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr == "vtop: memory-ceiling is not a vtop trace (too short)\n"


def test_trace_info_takes_a_name_from_any_folder(tmp_path: Path) -> None:
    result = vtop("trace", "info", "vllm-cpu-kv-exhaustion", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("trace       vllm-cpu-kv-exhaustion.vtrace (format 1")
    assert max(map(len, result.stdout.splitlines())) <= 80
