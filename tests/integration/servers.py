"""The real vLLM server configurations the integration tests run on, and the pool that keeps one
of them running.

Why a module of its own, not conftest.py: pytest imports a conftest as a top-level module of
its own, so configurations defined there and imported by the tests would be two classes that
never compare equal, and the pool would restart a server a test could have shared.
- Starting vLLM costs ~1 minute, so one server per configuration lives for the whole session
  and tests share it. Tests must therefore compare counter *increases*, never absolute values.
- Two cores cannot run two servers well, so the pool keeps at most one alive: asking for a
  different configuration stops the current one first. Each test names its configuration
  (`@pytest.mark.vllm(CONFIG)`), and conftest.py orders the run by `RUN_ORDER`, whatever the
  files: one start per configuration.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from tools.vllm_cpu.server import ModelName, VllmServer, make_server


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
# 16 seats and the same 20,480-token pool: the pool is never the wall.
ROOMY = ServerConfig(max_num_seqs=16, num_gpu_blocks=160)
# The tiny model on the roomy pool: so fast that its API server is the bottleneck.
TINY = ServerConfig(model="tiny", max_num_seqs=16, num_gpu_blocks=160)

RUN_ORDER = (ENGINE_KV, TINY, ROOMY, BUDGET)
"""The order the real-server tests run in, by configuration. ENGINE_KV first: the shared KV
run (`kv_exhausted_run`) wants a fresh server, and the tests after it reuse that server. A
test that leaves the server in another configuration (`then=`: the live restart test turns
ROOMY into BUDGET, as a user applying advice does) runs last of its own and hands its server
to the next configuration's tests."""


def _make(config: ServerConfig, port: int | None = None) -> VllmServer:
    return make_server(
        config.model,
        max_num_seqs=config.max_num_seqs,
        num_gpu_blocks=config.num_gpu_blocks,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_model_len=config.max_model_len,
        port=port,
        extra_args=tuple(config.extra_args),
    )


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
        server = _make(config)
        self.config, self.server = config, server
        return server.start()

    def restart_as(self, config: ServerConfig) -> VllmServer:
        """Stop the live server and start `config` on its port: the same endpoint comes back
        with its counters reset and its new flags, as after a user's restart."""
        if self.server is None:
            raise RuntimeError("no server to restart")
        port = self.server.port
        self.close()
        server = _make(config, port=port)
        self.config, self.server = config, server
        return server.start()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.config, self.server = None, None
