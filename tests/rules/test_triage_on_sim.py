"""End to end on the simulator: each scenario's rule fires, pointing the right way, alone.

The twin (`vtop.sim.Twin`) serves the same /metrics page a real vLLM would; this test reads it
the way the live source does (the page parser, one poll per virtual second, the scrape taking
as long as the twin's API server needs to answer), discovers the knobs as `discovery.merge`
does from `vllm:cache_config_info`, `/v1/models` and the server's command line, and runs the
shipped catalog through `Monitor`, exactly as `vtop` would. It then asserts, for each
scenario, that its rule fires with the expected direction of change, that no warning the
scenario does not explain fires, and that no advice contradicts itself. `healthy` must yield
no warning at all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from tests.sim.helpers import with_knobs
from vtop.model import Finding, Frame, Knob, Severity
from vtop.monitor import Monitor
from vtop.signals.extract import PageReader
from vtop.sim.scenarios import Scenario
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sources import discovery
from vtop.triage.engine import Engine

EP = "http://127.0.0.1:8000"
OPPOSITE = {("raise", "lower"), ("lower", "raise"), ("enable", "disable"), ("disable", "enable")}


@dataclass(frozen=True)
class Expect:
    rule: str | None
    advice: dict[str, str]
    """knob -> direction the scenario's rule must recommend."""
    allowed: frozenset[str] = frozenset()
    """Other rules that may fire at warning level alongside (same root cause, other angle)."""


EXPECT = {
    "healthy": Expect(None, {}),
    "memory-ceiling": Expect("memory-ceiling", {"max_num_seqs": "lower"}),
    "budget-too-small": Expect("budget-too-small", {"max_num_seqs": "raise"}),
    "prefill-budget-bound": Expect("prefill-budget-bound", {"max_num_batched_tokens": "raise"}),
    "past-sweet-spot": Expect("past-sweet-spot", {"max_num_seqs": "lower"}),
    "client-static-batching": Expect("client-static-batching", {}),
    "long-prompt-starvation": Expect(
        "long-prompt-starvation", {"long_prefill_token_threshold": "raise"}
    ),
    "ttft-queueing": Expect("ttft-queueing", {"max_num_seqs": "raise"}),
    "prefix-cache-ineffective": Expect(
        "prefix-cache-ineffective", {"enable_prefix_caching": "enable"}
    ),
    "underloaded": Expect("underloaded", {}),
    "frontend-bound": Expect("frontend-bound", {"api_server_count": "raise"}),
}

ENGINE_RULES = list(Engine.from_catalog(user=False).rules)


def process_knobs(twin: object) -> dict[str, Knob]:
    """What the local process probe would read from the twin's command line."""
    knobs = getattr(twin, "knobs", {})
    return {k: Knob(k, v, "process", "sim command line") for k, v in knobs.items()}


def run(name: Scenario | str, seconds: float, seed: int = 0, monitor: Monitor | None = None,
        start_s: float = 0.0) -> list[list[Finding]]:  # fmt: skip
    """Poll the twin once a virtual second (from `start_s` into its run); the findings after
    every poll."""
    twin = Twin(name, seed=seed)
    twin.advance(start_s)
    reader = PageReader()
    monitor = monitor or Monitor(engine=Engine(ENGINE_RULES))
    cache_info: dict[str, str] = {}
    history: list[list[Finding]] = []
    while twin.now < seconds:
        twin.advance(1.0)
        delay, page = twin.scrape()
        scrape = reader.read(page.decode(), endpoint=EP, t=twin.now, latency_s=delay,
                             size_bytes=len(page))  # fmt: skip
        if scrape.info and scrape.info != cache_info:
            cache_info = dict(scrape.info)
            knobs = discovery.merge(cache_info=cache_info, endpoint=twin.endpoint_info(),
                                    process=process_knobs(twin))  # fmt: skip
            scrape = dataclasses.replace(scrape, knobs=knobs, server=twin.endpoint_info())
        monitor.feed(Frame(twin.now, (scrape,), gpu=twin.gpu_status()))
        history.append(list(monitor.endpoints[EP].findings))
    return history


def contradictions(findings: list[Finding]) -> list[str]:
    seen: dict[str, set[str]] = {}
    for f in findings:
        for r in f.recommendations:
            seen.setdefault(r.knob, set()).add(r.direction)
    return [k for k, d in seen.items() if any((a, b) in OPPOSITE for a in d for b in d)]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_scenario(name: str, seed: int) -> None:
    expect = EXPECT[name]
    history = run(name, seconds=480.0, seed=seed)
    assert all(not contradictions(fs) for fs in history)
    tail = history[-120:]  # the last two minutes: the symptom is established
    for findings in tail:
        firing = {f.rule: f for f in findings if f.state == "firing"}
        loud = {r for r, f in firing.items() if f.severity >= Severity.WARNING}
        if expect.rule is None:
            assert not loud, [firing[r].summary for r in loud]
            continue
        assert expect.rule in firing, f"{expect.rule} not firing; got " + "; ".join(
            f"{f.rule}={f.state}: {f.summary}" for f in findings
        )
        assert loud <= {expect.rule} | expect.allowed, [firing[r].summary for r in loud]
        got = {r.knob: r.direction for r in firing[expect.rule].recommendations}
        for knob, direction in expect.advice.items():
            assert got.get(knob) == direction, (knob, got, firing[expect.rule].evidence)
        raises_seqs = any(r.knob == "max_num_seqs" and r.direction == "raise"
                          for f in firing.values() for r in f.recommendations)  # fmt: skip
        if name in ("memory-ceiling", "past-sweet-spot"):
            assert not raises_seqs


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["budget-too-small", "past-sweet-spot", "prefill-budget-bound", "memory-ceiling"]
)
def test_following_the_advice_converges(name: str) -> None:
    """Apply the firing advice and restart, as a user would: within three restarts the advice
    runs out, nothing is preempted, and throughput is no worse than 90% of the start (the
    sweet spot trades a little throughput for no preemption)."""
    from vtop.sim.scenarios import SCENARIOS

    scenario = SCENARIOS[name]
    fields = {f.name for f in dataclasses.fields(scenario.args)}

    def once(args: ServeArgs) -> tuple[list[Finding], float, float]:
        monitor = Monitor(engine=Engine(ENGINE_RULES))
        history = run(dataclasses.replace(scenario, args=args), 480.0, monitor=monitor)
        store = monitor.endpoints[EP].store
        return (history[-1], store.rate("generation_tokens", 180.0) or 0.0,
                store.rate("preemptions", 180.0) or 0.0)  # fmt: skip

    args = scenario.args
    findings, start_tps, _ = once(args)
    tps, preempt, restarts = start_tps, 0.0, 0
    while True:
        advice = {r.knob: r.new_value for f in findings if f.state == "firing"
                  for r in f.recommendations if r.knob in fields}  # fmt: skip
        if not advice:
            break
        restarts += 1
        assert restarts <= 3, f"still advising after 3 restarts: {advice}"
        args = with_knobs(args, advice)
        findings, tps, preempt = once(args)
    assert restarts >= 1
    assert preempt < 0.01
    assert tps >= 0.9 * start_tps
