"""The in-process twin: one simulated vLLM server that the rest of vtop talks to.

This is the API everything else builds on (the demo, rule tests, training traces, the sim
HTTP server, the what-if): construct it from a scenario (or from a preset, its knobs and a
workload: `Twin.of`), `advance` it in virtual seconds, and read it the way vtop reads a real
server: a /metrics page in any supported dialect, NVML-like GPU readings, what `/v1/models`
and `/version` say, and the knobs and command line discovery would find. Virtual time only
moves when `advance` is called, as fast as the CPU allows; `vtop.sim.clock.RealTime` maps
wall time onto it for live use.
"""

from __future__ import annotations

import itertools
import time

from vtop.model import EndpointInfo, GpuStatus
from vtop.sim.dialects import DEFAULT_DIALECT, histogram_grids, normalise
from vtop.sim.dialects import dialect as get_dialect
from vtop.sim.engine import Engine
from vtop.sim.exposition import PageState, render
from vtop.sim.frontend import FrontendSpec
from vtop.sim.gpu import GpuModel
from vtop.sim.hardware import Preset
from vtop.sim.scenarios import Scenario, get_scenario
from vtop.sim.serve_args import ServeArgs, resolve
from vtop.sim.workload import Workload


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
        self._tickets = itertools.count()
        self._asked: dict[int, str | None] = {}
        """Ticketed /metrics requests not answered yet, and the dialect each asked for."""
        self._answers: dict[int, tuple[float, bytes | Exception]] = {}
        self.engine.on_answer = self._answer

    @classmethod
    def of(
        cls,
        preset: Preset,
        args: ServeArgs,
        workload: Workload,
        *,
        frontend: FrontendSpec | None = None,
        seed: int = 0,
        epoch: float = 0.0,
        keep_finished: bool = False,
    ) -> Twin:
        """A twin of a server that is no named incident: `preset` started with `args` under
        `workload` (the what-if's fitted twin, the real CPU server's, a test's), behind
        `frontend` (vLLM's default API server when None), from virtual second 0 at `epoch`."""
        scenario = Scenario(
            name="custom",
            title="A twin built from a preset, its knobs and a workload",
            cause="",
            symptom="",
            rule=None,
            preset=preset,
            args=args,
            workload=workload,
            frontend=frontend if frontend is not None else FrontendSpec(),
        )
        return cls(scenario, seed=seed, epoch=epoch, keep_finished=keep_finished)

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
        self._run_to(self._now + dt_s)

    def _run_to(self, t: float) -> None:
        t0 = self._now
        dt_s = t - t0
        busy0 = self.engine.busy.total
        self._now = t
        self.engine.advance_to(t)
        mean_util = min(1.0, (self.engine.busy.total - busy0) / dt_s)
        self.gpu.advance(dt_s, mean_util)

    def warm_up(self) -> None:
        """Advance to the scenario's `warmup_s`, where its symptom is established."""
        if self._now < self.scenario.warmup_s:
            self.advance(self.scenario.warmup_s - self._now)

    # --- what vtop reads ------------------------------------------------------------------------

    def metrics_text(
        self, dialect: str | None = None, *, process_metrics: bool = True, at: float | None = None
    ) -> bytes:
        """The full /metrics page as `dialect` ("0.6", "0.10", "0.32"; default: the version
        this twin emulates, "0.32" unless told otherwise) writes it; `at`: the virtual instant
        it is rendered for while the twin runs (the answer to a scrape), default now."""
        t = self._now if at is None else at
        d = get_dialect(dialect or self.dialect)
        state = PageState(
            self.engine.stats,
            self.resolved,
            self._gpu_status_at(t),
            self.epoch,
            self.engine.throughput(),
            self.engine.fe.busy_total,
        )
        return render(d, state, process_metrics=process_metrics)

    def gpu_status(self) -> GpuStatus:
        """NVML-style readings; utilisation is the kernel-busy share of the last second."""
        return self._gpu_status_at(self._now)

    def _gpu_status_at(self, t: float) -> GpuStatus:
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

    # --- /metrics through the API server's event loop -----------------------------------------
    #
    # A scrape is answered by the loop cycle that takes it, and the page reads the metrics as
    # they stand when that cycle ends: a scrape that waits behind a long pass of the loop reads
    # what the loop had processed by then, not what the engine did meanwhile (the stale gauges
    # of a CPU-starved API server). When that is cannot be known at registration (the cycle
    # also takes whatever arrives until it starts), so the page is rendered by the twin at the
    # answer instant itself, whichever way time is advanced, and the caller collects it.

    def scrape(self, dialect: str | None = None) -> tuple[float, bytes]:
        """Send a /metrics request now and run until the API server answers it: (virtual
        seconds it took, the page as `dialect` writes it). The twin ends at the answer."""
        t0 = self._now
        ticket = self.request_metrics(dialect)
        while (answer := self.answer(ticket)) is None:
            eta = self.answer_eta(ticket)
            self._run_to(eta if eta > self._now else self._now + 1e-6)
        return answer[0] - t0, answer[1]

    def request_metrics(self, dialect: str | None = None) -> int:
        """Register a /metrics request now (the sim server's clients); a ticket for `answer`."""
        ticket = next(self._tickets)
        self._asked[ticket] = dialect
        self.engine.fe.scrape(self._now, ticket)
        return ticket

    def answer(self, ticket: int) -> tuple[float, bytes] | None:
        """(virtual time it was answered, the page) once the API server has answered; raises
        what rendering the page raised."""
        answer = self._answers.pop(ticket, None)
        if answer is None:
            return None
        t, page = answer
        if isinstance(page, Exception):
            raise page
        return t, page

    def answer_eta(self, ticket: int) -> float:
        """When `ticket` is answered: exact once its loop cycle began, else a lower bound."""
        fe = self.engine.fe
        at = fe.answer_at.get(ticket)
        return at if at is not None else fe.earliest_answer(self._now)

    def forget(self, ticket: int) -> None:
        """Nobody waits for `ticket` any more (a client that gave up): render no page for it."""
        self._asked.pop(ticket, None)
        self._answers.pop(ticket, None)

    def _answer(self, tickets: list[int], t: float) -> None:
        """Render the pages answered at `t` (called by the engine mid-advance). A page that
        cannot be rendered is a bug for whoever asked for it, not for the advance: the error
        is kept and raised by `answer`."""
        fe = self.engine.fe
        for ticket in tickets:
            fe.answer_at.pop(ticket, None)
            if ticket not in self._asked:
                continue
            dialect = self._asked.pop(ticket)
            try:
                self._answers[ticket] = (t, self.metrics_text(dialect, at=t))
            except Exception as exc:  # handed to the requester, who raises it
                self._answers[ticket] = (t, exc)

    def scrape_delay(self) -> float:
        """Register a /metrics request now that nobody reads; a lower bound on the virtual
        seconds until the API server answers it (`scrape` waits for the answer itself)."""
        fe = self.engine.fe
        return max(0.0, fe.scrape(self._now) - self._now)
