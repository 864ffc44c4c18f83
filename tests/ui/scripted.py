"""A `FrameSource` that plays scripted frames, and scripted findings, for UI tests.

The app is built exactly as the CLI builds it (a source, a monitor, options); only the frames
and the connection status are scripted. Findings come from a provider, the seam where the
triage engine plugs in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import lru_cache

from tests.ui import pages
from vtop.model import Finding, Frame, GpuStatus, Knob, Recommendation, Severity
from vtop.monitor import Monitor
from vtop.sources.status import CONNECTED, SIMULATED, ConnectionStatus
from vtop.ui.app import VtopApp
from vtop.whatif.goals import Goals


class ScriptedSource:
    """Plays frames in order; the last one repeats (with its time moved on) when they run out."""

    def __init__(
        self, frames: Iterable[Frame], status: Callable[[str], ConnectionStatus] | None = None
    ) -> None:
        self.frames = list(frames)
        self.polled = 0
        self.closed = False
        self._status = status or (lambda ep: CONNECTED)

    async def poll(self) -> Frame:
        frame = self.frames[min(self.polled, len(self.frames) - 1)]
        self.polled += 1
        return frame

    def status(self, endpoint: str) -> ConnectionStatus:
        return self._status(endpoint)

    async def aclose(self) -> None:
        self.closed = True


EP = "http://localhost:8000"


def cap_knob(value: int = 64) -> Knob:
    return Knob("max_num_seqs", value, "process", "pid 4242 command line")


FIRING = Finding(
    rule="memory-ceiling",
    title="Memory ceiling",
    endpoint=EP,
    severity=Severity.CRITICAL,
    state="firing",
    summary="KV cache ≥ 95% with an empty queue and 0.4 preemptions/s: memory is the wall",
    evidence=(
        ("kv_usage avg 5m", "97.2%"),
        ("waiting avg 5m", "0.3"),
        ("preemptions/s 5m", "0.41"),
    ),
    recommendations=(
        Recommendation(
            "kv_cache_dtype",
            Knob("kv_cache_dtype", "auto", "metrics", "vllm:cache_config_info cache_dtype"),
            "fp8",
            "set",
            "fp8 halves KV bytes per token: capacity ×2",
            {
                "kv_capacity_tokens": Knob(
                    "kv_capacity_tokens",
                    53248,
                    "metrics",
                    "vllm:cache_config_info kv_cache_size_tokens",
                )
            },
            tradeoff="small accuracy cost on some models",
        ),
        Recommendation(
            "gpu_memory_utilization",
            Knob("gpu_memory_utilization", 0.9, "metrics", "vllm:cache_config_info"),
            0.95,
            "raise",
            "min(0.95, used + free headroom)",
            {"gpu_mem_free_gib": 1.4, "gpu_mem_total_gib": 24.0},
        ),
    ),
    since=pages.T0 + 200,
    held_s=180.0,
    for_s=60.0,
)

PENDING = Finding(
    rule="budget-too-small",
    title="Scheduler budget too small",
    endpoint=EP,
    severity=Severity.WARNING,
    state="pending",
    summary="queue > 0 while the GPU is not saturated",
    held_s=40.0,
    for_s=60.0,
    needs_s=20.0,
)

UNDERLOADED = Finding(
    rule="underloaded",
    title="Too little load for batching to matter",
    endpoint=EP,
    severity=Severity.INFO,
    state="pending",
    summary="2 requests in flight on average",
    held_s=3.0,
    for_s=10.0,
    needs_s=7.0,
)
"""An info-level rule whose evidence accrues: not a bottleneck, so not a likely cause."""

SUPPRESSED = Finding(
    rule="raise-max-num-seqs",
    title="Batch cap binds",
    endpoint=EP,
    severity=Severity.WARNING,
    state="suppressed",
    summary="running sits at max_num_seqs",
    suppressed_by="memory-ceiling",
)

FINDINGS = (PENDING, SUPPRESSED, FIRING)


@lru_cache(maxsize=8)
def sim_frames(scenario: str, n: int) -> tuple[Frame, ...]:
    """`n` one-second frames of a simulator scenario, the same at every run (fixed epoch and
    seed); cached, because the twin takes a few seconds per simulated five minutes."""
    from vtop.sources.sim import SimSource

    source = SimSource.scenario(scenario, seed=0, epoch=pages.T0, in_thread=False)
    return tuple(source.poll_now() for _ in range(n))


@lru_cache(maxsize=4)
def attach_frames(scenarios: tuple[str, ...], n: int, pace_s: float = 0.25) -> tuple[Frame, ...]:
    """`n` frames `pace_s` apart from the moment vtop attaches to simulated servers that have
    been in their scenarios for five minutes (as `vtop --demo` does, polling fast while it
    warms up): the rules' conditions hold from the first polls and their verdicts come
    seconds later. A server per scenario, one frame polling them all."""
    from vtop.sources.sim import SimSource

    twins = [
        SimSource.scenario(name, seed=0, epoch=pages.T0, in_thread=False, running_s=300.0).twins[0]
        for name in scenarios
    ]
    source = SimSource(twins, in_thread=False)
    out = []
    for _ in range(n):
        source.pace(pace_s)
        out.append(source.poll_now())
    return tuple(out)


def build_attach_app(scenarios: tuple[str, ...], n: int) -> tuple[VtopApp, ScriptedSource]:
    """An app that has polled nothing yet over `attach_frames` (the real rules run in the
    monitor; a test ingests the frames one at a time)."""
    source = ScriptedSource(attach_frames(scenarios, n), lambda e: SIMULATED)
    app = VtopApp(
        source, Monitor(capacity=3600), interval=1.0, self_cpu=lambda: 0.4, autopoll=False
    )
    return app, source


def for_endpoint(findings: Sequence[Finding], endpoint: str) -> tuple[Finding, ...]:
    return tuple(replace(f, endpoint=endpoint) for f in findings)


def merged(frames: Sequence[Sequence[Frame]]) -> list[Frame]:
    """Several scenarios' frames as one poll of several endpoints each (the first's GPUs)."""
    out = []
    for polls in zip(*frames, strict=True):
        first = polls[0]
        scrapes = tuple(s for frame in polls for s in frame.scrapes)
        out.append(Frame(first.t, scrapes, first.gpu, first.host))
    return out


FOUR = ("memory-ceiling", "healthy", "budget-too-small", "ttft-queueing")
"""Four simulated servers, each in its own state, for the screens of several endpoints."""


def build_sim_app(
    scenario: str | Sequence[str],
    *,
    history: int = 300,
    findings: Sequence[Finding] | None = FINDINGS,
    theme: str = "dark",
    goals: Goals | None = None,
) -> VtopApp:
    """An app over `history` seconds of a simulator scenario, or of several as as many
    endpoints (no polling: frozen in time).

    `findings=None` shows what the triage engine (run by the monitor) concludes."""
    names = (scenario,) if isinstance(scenario, str) else tuple(scenario)
    each = [sim_frames(name, history + 1) for name in names]
    frames = merged(each) if len(each) > 1 else list(each[0])
    monitor = Monitor(capacity=3600)
    for frame in frames[:history]:
        monitor.feed(frame)
    endpoint = frames[0].scrapes[0].endpoint
    source = ScriptedSource(frames[history:], lambda e: SIMULATED)
    chosen = None if findings is None else provider(for_endpoint(findings, endpoint))
    return VtopApp(
        source,
        monitor,
        interval=1.0,
        theme=theme,
        findings=chosen,
        self_cpu=lambda: 0.4,
        autopoll=False,
        goals=goals,
    )


def provider(findings: Sequence[Finding] = FINDINGS) -> Callable[[Monitor, str], Sequence[Finding]]:
    return lambda monitor, endpoint: tuple(f for f in findings if f.endpoint == endpoint)


def build_app(
    *,
    history: int = 400,
    endpoints: Sequence[pages.Endpoint] | None = None,
    findings: Sequence[Finding] = FINDINGS,
    status: Callable[[str], ConnectionStatus] | None = None,
    future: int = 20,
    gpu: GpuStatus = pages.GPU,
    theme: str = "dark",
    window_s: float = 300.0,
) -> tuple[VtopApp, ScriptedSource]:
    """An app over a monitor already fed `history` polls, with `future` more to poll."""
    eps = list(endpoints) if endpoints is not None else [pages.Endpoint(EP)]
    monitor = Monitor(capacity=3600)
    for frame in pages.frames(eps, history, gpu=gpu):
        monitor.feed(frame)
    source = ScriptedSource(pages.frames(eps, future, gpu=gpu, start=history), status)
    app = VtopApp(
        source,
        monitor,
        interval=1.0,
        window_s=window_s,
        theme=theme,
        findings=provider(findings),
        self_cpu=lambda: 0.4,
        autopoll=False,
    )
    return app, source
