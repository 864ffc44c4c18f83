"""A twin of vLLM's V1 scheduler that serves real-format /metrics: demo, test bed, training.

A new user has no GPU, tests cannot start a 4090 and training needs incidents on demand, so
vtop carries a model of the server it watches. The package is layered so each part can be read
(and tested) alone:

    workload.py   clients: Poisson (bursty), closed loop, fixed waves; length distributions
    frontend.py   the API server as a CPU-bound stage (bursts, late /metrics)
    scheduler.py  vLLM V1's scheduler: budgets, chunked prefill, preemption, prefix cache
    kvcache.py    the KV block pool and its prefix-cache entries
    hardware.py   roofline step time, KV capacity, presets (4090 bf16/AWQ, H100, ...)
    calibration.py  the step-time law fitted to measured steps (the CPU preset's, the what-if's)
    engine.py     the virtual-time loop tying them together; stats.py its metric state
    families.py   the newest vLLM's /metrics families; dialects.py each older version as
                  a delta over them; exposition.py renders a page
    gpu.py        NVML-like readings; serve_args.py knobs and the `vllm serve` argv
    twin.py       the API: Twin(scenario).advance(dt), metrics_text(), gpu_status(), ...
    scenarios.py  named incidents with their cause and the rule they must trigger
    clock.py, server.py   wall-time driver, loopback HTTP server (`vtop sim`: vtop/cli/sim.py)

`Twin` and `serve` are re-exported here. What only the tests and benches use (a twin's headline
numbers, the seeds' experiments, the real CPU server's twin and sampling) is in tests/simtools/.
"""

from vtop.sim.server import SimServer, serve
from vtop.sim.twin import Twin

__all__ = ["SimServer", "Twin", "serve"]
