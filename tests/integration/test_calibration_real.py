"""The twin's `cpu-engine` preset against the real vLLM CPU server, in CI.

bench/calibrate.py compares three configurations at length; this keeps the hardest one under
test on every run, cheaply: the KV-exhausted configuration runs on the shared engine server
(max_num_seqs 16, 24 blocks: the pool's default config, so no extra start-up) for a 15 s
warm-up and 40 s of 1 Hz polling, and the twin runs the same arguments and load. The same wall
must bind in both (KV), and generated tokens/s must agree within 2x. The real figures depend on
the machine's speed; on a machine much slower than the one the preset was fitted on, the
throughput check fails, and that is true: the twin no longer describes that server.
"""

from __future__ import annotations

import pytest

from tools.vllm_cpu.load import LoadResult, Shape, closed_loop
from tools.vllm_cpu.server import VllmServer
from vtop.sim.calibration import CONFIGS, sample_server, sample_twin

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WARMUP_S = 15.0
SECONDS = 40.0


async def test_kv_exhausted_binds_the_same_wall_on_the_real_server_and_the_twin(
    engine_server: VllmServer,
) -> None:
    cfg = next(c for c in CONFIGS if c.name == "kv-exhausted")
    assert (cfg.max_num_seqs, cfg.num_gpu_blocks) == (16, 24)  # the engine_server fixture
    load = closed_loop(engine_server.url, concurrency=cfg.clients,
                       duration=WARMUP_S + SECONDS + 2.0,
                       shape=Shape(prompt_tokens=cfg.prompt, max_tokens=cfg.output), seed=5,
                       drain=False)  # fmt: skip
    real, result = await sample_server(engine_server.url, load, SECONDS, WARMUP_S)
    assert isinstance(result, LoadResult) and result.errors == 0, result
    twin = sample_twin(cfg.twin(), SECONDS, WARMUP_S)
    print(f"\nreal: {real}\ntwin: {twin}")
    assert real.wall(cfg.max_num_seqs) == "KV", real
    assert twin.wall(cfg.max_num_seqs) == "KV", twin
    assert 0.5 <= twin.generation_tps / real.generation_tps <= 2.0
