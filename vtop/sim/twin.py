"""The in-process twin: one simulated vLLM server that the rest of vtop talks to.

This is the API everything else builds on (the demo, rule tests, training traces, the sim
HTTP server): construct it from a scenario, `advance` it in virtual seconds, and read it the
way vtop reads a real server: a /metrics page in any supported dialect, NVML-like GPU
readings, what `/v1/models` and `/version` say, and the knobs and command line discovery would
find. Virtual time only moves when `advance` is called, as fast as the CPU allows;
`vtop.sim.clock.RealTime` maps wall time onto it for live use.
"""

from __future__ import annotations

import time

from vtop.model import EndpointInfo, GpuStatus
from vtop.sim.dialects import DEFAULT_DIALECT, histogram_grids, normalise
from vtop.sim.dialects import dialect as get_dialect
from vtop.sim.engine import Engine
from vtop.sim.exposition import PageState, render
from vtop.sim.gpu import GpuModel
from vtop.sim.scenarios import Scenario, get_scenario
from vtop.sim.serve_args import resolve


class Twin:
    """A simulated vLLM server running `scenario` (a `Scenario` or its name)."""

    def __init__(
        self,
        scenario: Scenario | str,
        seed: int = 0,
        *,
        emulate_version: str = DEFAULT_DIALECT,
        epoch: float | None = None,
        keep_finished: bool = False,
    ) -> None:
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.seed = seed
        self.dialect = normalise(emulate_version)
        self.epoch = time.time() if epoch is None else epoch
        """Unix time of virtual second 0 (the `_created` value of every counter)."""
        sc = self.scenario
        self.resolved = resolve(sc.args, sc.preset)
        self.engine = Engine(
            self.resolved.preset,
            self.resolved.scheduler_config(),
            sc.workload,
            seed=seed,
            frontend=sc.frontend,
            grids=histogram_grids(self.resolved.max_model_len),
            keep_finished=keep_finished,
        )
        self.gpu = GpuModel(self.resolved)
        self._now = 0.0

    # --- time -----------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """Virtual seconds since the server started."""
        return self._now

    def advance(self, dt_s: float) -> None:
        """Run the server for `dt_s` more virtual seconds."""
        if dt_s < 0:
            raise ValueError(f"cannot advance by a negative time ({dt_s})")
        if dt_s == 0:
            return
        t0 = self._now
        busy0 = self.engine.busy.total
        self._now = t0 + dt_s
        self.engine.advance_to(self._now)
        mean_util = min(1.0, (self.engine.busy.total - busy0) / dt_s)
        self.gpu.advance(dt_s, mean_util)

    def warm_up(self) -> None:
        """Advance to the scenario's `warmup_s`, where its symptom is established."""
        if self._now < self.scenario.warmup_s:
            self.advance(self.scenario.warmup_s - self._now)

    # --- what vtop reads ------------------------------------------------------------------------

    def metrics_text(self, dialect: str | None = None, *, process_metrics: bool = True) -> bytes:
        """The full /metrics page as `dialect` ("0.6", "0.10", "0.32"; default: the version
        this twin emulates, "0.32" unless told otherwise) writes it."""
        d = get_dialect(dialect or self.dialect)
        state = PageState(
            self.engine.stats,
            self.resolved,
            self.gpu_status(),
            self.epoch,
            self.engine.throughput(),
            self.engine.fe.busy_total,
        )
        return render(d, state, process_metrics=process_metrics)

    def gpu_status(self) -> GpuStatus:
        """NVML-style readings; utilisation is the kernel-busy share of the last second."""
        t = self._now
        util = self.engine.busy.busy_share(max(0.0, t - 1.0), t) if t > 0 else 0.0
        return self.gpu.status(util)

    def endpoint_info(self) -> EndpointInfo:
        return EndpointInfo(
            version=get_dialect(self.dialect).version,
            models=(self.resolved.preset.served_model_name,),
            max_model_len=self.resolved.max_model_len,
        )

    @property
    def knobs(self) -> dict[str, int | float | str | bool]:
        return self.resolved.knobs()

    @property
    def command_line(self) -> list[str]:
        return self.resolved.command_line()

    def note_http(
        self, handler: str, method: str, response_bytes: int, seconds: float = 0.001
    ) -> None:
        """Count a request the sim server answered (except /metrics), as vLLM's
        instrumentator does: `http_requests_total{handler,method,status}` and friends."""
        self.engine.stats.http_request(handler, method, 0.0, float(response_bytes), seconds)

    def scrape_delay(self) -> float:
        """Register a /metrics request now; virtual seconds until the API server answers it."""
        fe = self.engine.fe
        return max(0.0, fe.scrape(self._now) - self._now)
