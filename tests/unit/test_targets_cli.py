"""`vtop --targets FILE` and `vtop --discover` end to end: real processes, real HTTP.

The discovered server is a real process started the way vLLM is started (`python -m
vllm.entrypoints.openai.api_server --port P --max-num-seqs 24`), from a stand-in `vllm`
package whose API server is the simulator's HTTP server: discovery finds it by its listening
socket, and vtop then polls it like any server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pageserver import Answer, PageServer, Script
from tests.prom import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGE = """vllm:num_requests_running{{engine="0",model_name="m"}} {running}
vllm:num_requests_waiting{{engine="0",model_name="m"}} 0
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
"""

API_SERVER = """\
import sys, time
from vtop.sim.server import serve
from vtop.sim.twin import Twin

argv = sys.argv[1:]
port = int(argv[argv.index("--port") + 1])
server = serve(Twin("healthy"), "127.0.0.1", port)
print("ready", flush=True)
time.sleep(120)
"""


def vtop(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "vtop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
        env=env,
    )


def test_targets_file_watches_every_endpoint_with_its_knobs(tmp_path: Path) -> None:
    one = PageServer(Script({"/metrics": Answer(PAGE.format(running=3).encode())}))
    two = PageServer(Script({"/metrics": Answer(PAGE.format(running=5).encode())}))
    with one, two:
        fleet = tmp_path / "fleet.txt"
        fleet.write_text(
            f"# two replicas\n{one.url}  name=a  max_num_seqs=48\n"
            f"{two.url.removeprefix('http://')}   # bare host:port\n"
        )
        result = vtop("--targets", str(fleet), "--once", "--interval", "1")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    eps = {e["url"]: e for e in doc["endpoints"]}
    assert set(eps) == {one.url, two.url}
    assert eps[one.url]["signals"]["running"]["last"] == 3
    assert eps[two.url]["signals"]["running"]["last"] == 5
    assert eps[one.url]["config"]["max_num_seqs"] == {
        "value": 48,
        "provenance": "flag",
        "detail": f"{fleet}:2 max_num_seqs=48",
    }
    assert eps[two.url]["config"]["max_num_seqs"]["provenance"] == "default"


def test_a_bad_targets_line_is_one_error_and_nothing_is_watched(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.txt"
    fleet.write_text("http://127.0.0.1:1\nhttp://127.0.0.1:2 max_num_seqs=many\n")
    result = vtop("--targets", str(fleet), "--once")
    assert result.returncode == 2
    assert result.stderr == (
        f"vtop: {fleet}:2: max_num_seqs=many: expected a whole number from 1 to 1048576\n"
    )
    assert result.stdout == ""


def test_a_bad_url_is_one_line() -> None:
    result = vtop("--url", "ftp://x", "--once")
    assert (result.returncode, result.stderr) == (
        2,
        "vtop: --url: URL 'ftp://x' is not http:// or https://\n",
    )


@pytest.fixture
def stand_in_vllm(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """A process with vLLM's argv serving the simulator on a free port: (pid, port)."""
    for package in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "vllm/entrypoints/openai/api_server.py").write_text(API_SERVER)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--port",
        str(port),
        "--max-num-seqs",
        "24",
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, process_group=0)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc.pid, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_discover_prints_the_local_servers_and_watches_them(
    stand_in_vllm: tuple[int, int],
) -> None:
    pid, port = stand_in_vllm
    start = time.monotonic()
    result = vtop("--discover", "--once", "--interval", "1")
    assert result.returncode == 0, result.stderr
    url = f"http://127.0.0.1:{port}"
    found = [line for line in result.stderr.splitlines() if f"pid {pid} " in line]
    assert found and found[0].startswith(f"vtop: found pid {pid}  {url}  (listening)  ")
    assert "vllm.entrypoints.openai.api_server --port" in found[0]
    (ep,) = [e for e in json.loads(result.stdout)["endpoints"] if e["url"] == url]
    assert ep["status"] == "ok"
    assert ep["config"]["max_num_seqs"]["value"] == 24  # read from the process's command line
    assert ep["config"]["max_num_seqs"]["provenance"] == "process"
    assert time.monotonic() - start < 30
