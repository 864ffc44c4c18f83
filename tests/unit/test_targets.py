"""Targets files (`--targets FILE`): the format, its one-line errors, and per-endpoint knobs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from vtop.model import Knob
from vtop.sources.host import VllmProcess
from vtop.sources.targets import (
    Target,
    TargetsError,
    describe,
    discover,
    discovered_url,
    load_targets,
    merge,
    parse_targets,
)

GOOD = """\
# the fleet
http://10.0.0.5:8000   name=a0  max_num_seqs=128      # first replica
10.0.0.5:8001          name=a1  zone="eu west"  note="say \\"hi\\""

  https://user:secret@gpu.example.com/vllm  max_num_batched_tokens=8192
"""


def test_a_good_file_gives_urls_labels_and_where() -> None:
    a, b, c = parse_targets(GOOD, "fleet.txt")
    assert (a.url, dict(a.labels), a.where) == (
        "http://10.0.0.5:8000",
        {"name": "a0", "max_num_seqs": "128"},
        "fleet.txt:2",
    )
    assert b.url == "10.0.0.5:8001" and b.endpoint == "http://10.0.0.5:8001"
    assert dict(b.labels) == {"name": "a1", "zone": "eu west", "note": 'say "hi"'}
    assert b.where == "fleet.txt:3"
    # credentials never reach the endpoint name
    assert c.endpoint == "https://gpu.example.com/vllm" and c.where == "fleet.txt:5"
    assert c.instance == "gpu.example.com:443" and a.instance == "10.0.0.5:8000"


def test_knob_labels_become_knobs_with_file_and_line() -> None:
    a, _, c = parse_targets(GOOD, "fleet.txt")
    assert a.knobs() == {
        "max_num_seqs": Knob("max_num_seqs", 128, "flag", "fleet.txt:2 max_num_seqs=128")
    }
    assert c.knobs()["max_num_batched_tokens"].value == 8192


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("http://a:8000\nftp://b:21\n", "f.txt:2: URL 'ftp://b:21' is not http:// or https://"),
        ("http://a:8000 name\n", "f.txt:1: expected name=value after the URL, got 'name'"),
        ("http://a:99999\n", "f.txt:1: URL 'http://a:99999' has a bad port"),
        ("http://:8000\n", "f.txt:1: URL 'http://:8000' names no host"),
        (
            "\n\nhttp://a:1 max_num_seqs=lots\n",
            "f.txt:3: max_num_seqs=lots: expected a whole number from 1 to 1048576",
        ),
        (
            "http://a:1 max_num_seqs=0\n",
            "f.txt:1: max_num_seqs=0: expected a whole number from 1 to 1048576",
        ),
        (
            "http://a:1 gpu_memory_utilization=x\n",
            "f.txt:1: gpu_memory_utilization=x: expected a number above 0 up to 1",
        ),
        ("http://a:1 9lives=1\n", "f.txt:1: '9lives' is not a label name (letters, digits, _)"),
        ("http://a:1 x=1 x=2\n", "f.txt:1: label 'x' given twice"),
        ('http://a:1 x="open\n', "f.txt:1: unterminated quoted value"),
        ("http://a:1\nhttp://a:1/\n", "f.txt:2: http://a:1 is already listed on line 1"),
        ("name=a http://a:1\n", "f.txt:1: a line starts with the URL, got 'name=a'"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(text: str, error: str) -> None:
    with pytest.raises(TargetsError) as exc:
        parse_targets(text, "f.txt")
    assert str(exc.value) == error
    assert "\n" not in str(exc.value)


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(TargetsError, match=r"missing\.txt: cannot read the targets file: No such"):
        load_targets(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(TargetsError, match=r"empty\.txt: no targets in the file"):
        load_targets(empty)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"http://a:1\n\xff\xfe\n")
    with pytest.raises(TargetsError, match=r"bin\.txt:2: not UTF-8 text"):
        load_targets(binary)
    ok = tmp_path / "ok.txt"
    ok.write_text("http://a:1\n")
    assert [t.url for t in load_targets(ok)] == ["http://a:1"]


def _proc(
    pid: int, port: int, host: str | None, matched: Literal["socket", "argv"] = "socket"
) -> VllmProcess:
    knobs = {"port": Knob("port", port, "process")}
    if host is not None:
        knobs["host"] = Knob("host", host, "process")
    return VllmProcess(pid, (pid,), ("vllm", "serve", "m", "--port", str(port)), port,
                       matched, knobs)  # fmt: skip


def test_discovered_servers_become_targets() -> None:
    procs = [_proc(10, 8000, None), _proc(11, 8001, "0.0.0.0", "argv"),
             _proc(12, 8002, "10.1.2.3"), _proc(13, 8003, "::1")]  # fmt: skip
    assert [discovered_url(p) for p in procs] == [
        "http://127.0.0.1:8000", "http://127.0.0.1:8001", "http://10.1.2.3:8002",
        "http://[::1]:8003"]  # fmt: skip
    first = discover(procs)[0]
    assert first.where == "discovered: pid 10" and first.labels["pid"] == "10"
    line = describe(procs[1])
    assert line.startswith("pid 11  http://127.0.0.1:8001  (by --port)  vllm serve m --port")


def test_merge_keeps_the_first_mention() -> None:
    a = Target("http://a:1", {"name": "x"}, "f:1")
    merged = merge([a], [Target("a:1", {}, "--url"), Target("http://b:2")])
    assert [(t.endpoint, t.where) for t in merged] == [("http://a:1", "f:1"),
                                                       ("http://b:2", "--url")]  # fmt: skip
