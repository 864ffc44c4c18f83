"""`vtop trace info FILE`: what a trace holds, for clean, crashed and foreign files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.tracegen import busy_frames
from vtop.trace.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"


def info(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vtop", "trace", "info", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "80"},  # what a pipe gets when COLUMNS says nothing
        timeout=60,
        check=False,
    )


def test_info_on_a_clean_trace() -> None:
    result = info(GOLDEN / "busy.vtrace")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "busy.vtrace (format 1, written by vtop" in out
    assert "start       2025-06-15 15:06:41.008Z" in out
    assert "duration    9m 59s (600 polls, every 1.00 s)" in out
    assert "vLLM 0.32.0  Qwen/Qwen2.5-7B-Instruct" in out
    assert "\n            max_model_len 32768\n" in out  # continued under the values, whole
    assert "max_num_seqs" in out and "default" in out
    assert "GPUs        NVIDIA GeForce RTX 4090" in out
    assert "samples     170,400 (284 per poll)" in out
    assert "bytes/sample" in out and "footer (closed cleanly)" in out
    assert max(map(len, out.splitlines())) <= 80


def test_info_takes_a_shipped_traces_name_and_its_knob_table_fits_80_columns() -> None:
    """`long_prefill_token_threshold` (28 characters) once pushed its row out of line, and
    `vllm:cache_config_info …` details ran past 80 columns."""
    result = info(Path("memory-ceiling"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("trace       memory-ceiling.vtrace (format 1")
    assert max(map(len, lines)) <= 80
    knobs = [line for line in lines if line.startswith("  ") and line[2] != " "]
    ends = {
        line.index(" process") if " process" in line else line.index(" metrics")
        for line in knobs
        if "Qwen/" not in line
    }
    assert len(ends) == 1, knobs  # every value ends in the one column, the longest name too
    assert any(line.startswith("  long_prefill_token_threshold ") for line in knobs)


def test_info_on_a_crashed_recording_rebuilds_the_index(tmp_path: Path) -> None:
    path = tmp_path / "crashed.vtrace"
    rec = Recorder(path, sources=["test"], interval_s=1.0)
    for f in busy_frames(50):
        rec.feed(f)
    rec._writer.abandon()  # as if killed: no footer
    with path.open("ab") as fh:
        fh.write(b"\x03\x40\x00\x00")  # and a torn record
    result = info(path)
    assert result.returncode == 0
    assert "(50 polls" in result.stdout and "rebuilt by scanning" in result.stdout
    assert result.stderr.count("\n") == 1 and "warning" in result.stderr


def test_info_on_something_else_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    result = info(path)
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr == f"vtop: {path} is not a vtop trace (too short)\n"
