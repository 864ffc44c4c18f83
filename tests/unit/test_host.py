"""HostSampler on this machine, and find_vllm_process against real processes.

The vLLM servers here are real processes started the way vLLM is started
(`python -m vllm.entrypoints.openai.api_server …`, `python -m vllm.entrypoints.cli.main serve
…`, a `vllm` console script), from a stand-in `vllm` package written to a temp dir: it listens
on a TCP port and forks a child that keeps the same argv and inherits the socket, as vLLM's
engine-core and extra API-server processes do, plus a spawned child with its own argv.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from vtop.sources.host import HostSampler, find_vllm_process, local_vllm_servers, tree_pids

# --- HostSampler ----------------------------------------------------------------------------


def burn_cpu(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(range(1000))


def test_first_reading_has_no_cpu_delta_then_real_values() -> None:
    sampler = HostSampler()
    first = sampler.read()
    assert first.cpu_pct is None
    assert first.self_cpu_pct is None
    assert first.mem_total_bytes == psutil.virtual_memory().total
    assert first.mem_used_bytes is not None
    assert 0 < first.mem_used_bytes <= first.mem_total_bytes
    assert first.self_rss_bytes is not None
    assert first.self_rss_bytes > 1024 * 1024

    burn_cpu(0.3)
    second = sampler.read()
    assert second.cpu_pct is not None
    assert 0.0 < second.cpu_pct <= 100.0
    assert second.self_cpu_pct is not None
    assert second.self_cpu_pct > 20.0  # ~0.3 s of CPU in a window not much longer than that


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux cpu_times fields")
def test_host_cpu_is_the_busy_share_of_the_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    zero = type(psutil.cpu_times())(*[0.0] * len(psutil.cpu_times()))
    # Linux counts guest time inside user time as well; it must not be counted twice.
    t1 = zero._replace(user=100.0, idle=900.0, guest=10.0)
    t2 = zero._replace(user=160.0, system=20.0, idle=960.0, iowait=20.0, guest=30.0)
    samples = iter([t1, t2, t2])
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(samples))
    sampler = HostSampler()
    assert sampler.read().cpu_pct is None
    # total 1000 -> 1160 (guest excluded), idle + iowait 900 -> 980: 80 of 160 busy
    assert sampler.read().cpu_pct == 50.0
    assert sampler.read().cpu_pct is None  # no time passed: unknown, not 0


def test_idle_self_cpu_is_low() -> None:
    sampler = HostSampler()
    sampler.read()
    time.sleep(0.3)
    assert (sampler.read().self_cpu_pct or 0.0) < 20.0


def test_cpu_deltas_survive_a_change_of_thread() -> None:
    # psutil.cpu_percent(None) keeps its baseline per thread; a poll loop on a thread pool
    # would read 0.0 or garbage. The sampler keeps its own.
    sampler = HostSampler()
    sampler.read()
    burn_cpu(0.1)
    out: list[float | None] = []
    worker = threading.Thread(target=lambda: out.append(sampler.read().cpu_pct))
    worker.start()
    worker.join()
    assert out[0] is not None
    assert out[0] > 0.0


# --- find_vllm_process: real processes ----------------------------------------------------

SERVER = '''\
"""Stand-in for vLLM's API server: listen, fork an engine-like child, sleep."""
import os, socket, subprocess, sys, time


def main(argv):
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
    listen = os.environ.get("FAKE_VLLM_LISTEN_PORT", str(port))
    sock = None
    if listen != "none":
        sock = socket.socket()
        sock.bind(("127.0.0.1", int(listen)))
        sock.listen()
    spawned = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    child = os.fork()  # like vLLM's forked children: same argv, inherits the socket
    if child == 0:
        time.sleep(120)
        os._exit(0)
    ready = os.environ["FAKE_VLLM_READY"]
    with open(ready + ".tmp", "w") as f:
        f.write(f"{child} {spawned.pid}")
    os.rename(ready + ".tmp", ready)
    time.sleep(120)
'''

API_SERVER = """\
import sys
from vllm._fake_server import main

if __name__ == "__main__":
    main(sys.argv[1:])
"""

CLI_MAIN = """\
import sys
from vllm._fake_server import main

if __name__ == "__main__":
    assert sys.argv[1] == "serve"
    main(sys.argv[2:])
"""


@pytest.fixture(scope="module")
def fake_vllm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temp dir holding an importable stand-in `vllm` package and a `bin/vllm` script."""
    root = tmp_path_factory.mktemp("fake_vllm")
    for package in ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai", "vllm/entrypoints/cli"):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    (root / "vllm/_fake_server.py").write_text(SERVER)
    (root / "vllm/entrypoints/openai/api_server.py").write_text(API_SERVER)
    (root / "vllm/entrypoints/cli/main.py").write_text(CLI_MAIN)
    (root / "bin").mkdir()
    script = root / "bin/vllm"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom vllm._fake_server import main\n"
        "assert sys.argv[1] == 'serve'\nmain(sys.argv[2:])\n"
    )
    script.chmod(0o755)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    forked_child: int
    spawned_child: int

    @property
    def pid(self) -> int:
        return self.proc.pid


StartServer = Callable[..., Server]
"""start(launcher argv, server args, listen_port=None) -> a running stand-in server."""


@pytest.fixture
def start_server(fake_vllm: Path, tmp_path: Path) -> Iterator[StartServer]:
    started: list[subprocess.Popen[bytes]] = []

    def start(launcher: list[str], args: list[str], listen_port: str | None = None) -> Server:
        ready = tmp_path / f"ready-{len(started)}"
        env = {**os.environ, "PYTHONPATH": str(fake_vllm), "FAKE_VLLM_READY": str(ready)}
        if listen_port is not None:
            env["FAKE_VLLM_LISTEN_PORT"] = listen_port
        proc = subprocess.Popen([*launcher, *args], env=env, process_group=0)
        started.append(proc)
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None, f"stand-in server exited with {proc.returncode}"
            assert time.monotonic() < deadline, "stand-in server did not start"
            time.sleep(0.02)
        forked, spawned = map(int, ready.read_text().split())
        return Server(proc, forked, spawned)

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started: server + children
        proc.wait(timeout=10)


API = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
CLI = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "Qwen/Qwen2.5-7B-Instruct"]


def launchers(fake_vllm: Path) -> dict[str, list[str]]:
    return {
        "api_server": API,
        "cli_main": CLI,
        "script": [str(fake_vllm / "bin/vllm"), "serve", "m"],
    }


@pytest.mark.parametrize("launcher", ["api_server", "cli_main", "script"])
def test_finds_the_server_by_its_listening_socket(
    start_server: StartServer, fake_vllm: Path, launcher: str
) -> None:
    port = free_port()
    args = ["--port", str(port), "--max-num-seqs", "64", "--max-num-batched-tokens=4096"]
    args += ["--api-key", "sk-secret-1234", "--some-future-flag=1", "-tp", "1"]
    server = start_server(launchers(fake_vllm)[launcher], args)

    found = find_vllm_process(port)

    assert found is not None
    assert found.pid == server.pid  # not the forked child with the very same argv
    assert found.matched_by == "socket"
    assert found.port == port
    assert {server.pid, server.forked_child, server.spawned_child} <= set(found.pids)
    assert found.knobs["max_num_seqs"].value == 64
    assert found.knobs["max_num_seqs"].provenance == "process"
    assert found.knobs["max_num_seqs"].detail == f"pid {server.pid} command line --max-num-seqs"
    assert found.knobs["max_num_batched_tokens"].value == 4096
    assert found.knobs["port"].value == port
    assert found.knobs["tensor_parallel_size"].value == 1
    assert "sk-secret-1234" not in repr(found)
    assert "--max-num-seqs" in found.argv


def test_the_forked_child_listens_too_but_is_not_the_server(start_server: StartServer) -> None:
    port = free_port()
    server = start_server(API, ["--port", str(port)])
    child = psutil.Process(server.forked_child)
    assert child.cmdline() == psutil.Process(server.pid).cmdline()
    assert any(c.laddr.port == port for c in child.net_connections(kind="tcp"))

    found = find_vllm_process(port)
    assert found is not None
    assert found.pid == server.pid
    ours = [s for s in local_vllm_servers() if s.pid in found.pids]
    assert [(s.pid, s.port, s.matched_by) for s in ours] == [(server.pid, port, "socket")]


def test_a_listening_server_beats_one_that_only_claims_the_port(
    start_server: StartServer,
) -> None:
    port = free_port()
    loading = start_server(API, ["--port", str(port)], listen_port="none")
    serving = start_server(CLI, ["--port", str(port)])
    assert loading.pid != serving.pid
    found = find_vllm_process(port)
    assert found is not None
    assert (found.pid, found.matched_by) == (serving.pid, "socket")


def test_listening_elsewhere_than_the_port_flag(start_server: StartServer) -> None:
    flag_port, real_port = free_port(), free_port()
    server = start_server(API, ["--port", str(flag_port)], listen_port=str(real_port))

    found = find_vllm_process(real_port)
    assert found is not None
    assert (found.pid, found.matched_by) == (server.pid, "socket")
    by_flag = find_vllm_process(flag_port)
    assert by_flag is not None
    assert (by_flag.pid, by_flag.matched_by) == (server.pid, "argv")


def test_a_server_not_listening_yet_is_found_by_its_port_flag(start_server: StartServer) -> None:
    port = free_port()
    args = ["--port", str(port), "--max-num-seqs", "32"]
    server = start_server(API, args, listen_port="none")

    found = find_vllm_process(port)
    assert found is not None
    assert (found.pid, found.matched_by) == (server.pid, "argv")
    assert found.knobs["max_num_seqs"].value == 32


def test_without_a_port_flag_the_default_port_is_assumed(start_server: StartServer) -> None:
    server = start_server(API, ["--max-num-seqs", "8"], listen_port="none")
    found = find_vllm_process(8000)
    assert found is not None
    assert (found.pid, found.matched_by) == (server.pid, "argv")


def test_two_servers_each_found_by_their_own_port(start_server: StartServer) -> None:
    p1, p2 = free_port(), free_port()
    s1 = start_server(API, ["--port", str(p1), "--max-num-seqs", "16"])
    s2 = start_server(CLI, ["--port", str(p2), "--max-num-seqs", "256"])
    f1, f2 = find_vllm_process(p1), find_vllm_process(p2)
    assert f1 is not None
    assert f2 is not None
    assert (f1.pid, f1.knobs["max_num_seqs"].value) == (s1.pid, 16)
    assert (f2.pid, f2.knobs["max_num_seqs"].value) == (s2.pid, 256)
    assert not set(f1.pids) & set(f2.pids)


def test_no_server_on_the_port() -> None:
    assert find_vllm_process(free_port()) is None


def test_a_plain_listener_on_the_port_is_not_vllm() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert find_vllm_process(s.getsockname()[1]) is None


def test_tree_pids(start_server: StartServer) -> None:
    server = start_server(API, ["--port", str(free_port())])
    pids = tree_pids(server.pid)
    assert pids[0] == server.pid
    assert {server.forked_child, server.spawned_child} <= set(pids)
    assert tree_pids(2**22 + 12345) == ()
