"""The twin's `cpu-engine` preset against the real vLLM CPU server, in CI.

bench/calibrate.py compares three configurations at length; this keeps the hardest one under
test on every run, for free: the KV-exhausted configuration (max_num_seqs 16, 24 blocks, 40
clients of 16-128 prompt and 100-400 output tokens) is exactly the shared run of kv_run.py, so
its pages after a 15 s warm-up are compared with the twin run on the same arguments and load.
The same wall must bind in both (KV), and generated tokens/s must agree within 2x. The real
figures depend on the machine's speed; on a machine much slower than the one the preset was
fitted on, the throughput check fails, and that is true: the twin no longer describes that
server.
"""

from __future__ import annotations

import pytest

from tests.integration import kv_run
from tests.integration.kv_run import KvRun
from vtop.sim.calibration import CONFIGS, PageSampler, sample_twin

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WARMUP_S = 15.0


def test_kv_exhausted_binds_the_same_wall_on_the_real_server_and_the_twin(
    kv_exhausted_run: KvRun,
) -> None:
    cfg = next(c for c in CONFIGS if c.name == "kv-exhausted")
    # The shared run is this configuration: same seats, pool, clients and request shape.
    assert (cfg.max_num_seqs, cfg.num_gpu_blocks, cfg.clients) == (16, 24, 40)
    assert (cfg.prompt, cfg.output) == (kv_run.KV_HEAVY.prompt_tokens, kv_run.KV_HEAVY.max_tokens)
    sampler = PageSampler()
    for t, page in kv_exhausted_run.pages:
        if t >= WARMUP_S:
            sampler.add(t, page)
    real = sampler.figures()
    assert real.seconds >= 60, real
    twin = sample_twin(cfg.twin(), round(real.seconds), WARMUP_S)
    print(f"\nreal: {real}\ntwin: {twin}")
    assert real.wall(cfg.max_num_seqs) == "KV", real
    assert twin.wall(cfg.max_num_seqs) == "KV", twin
    assert 0.5 <= twin.generation_tps / real.generation_tps <= 2.0
