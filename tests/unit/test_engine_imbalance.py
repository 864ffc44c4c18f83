"""`engine-imbalance`: data-parallel engines that do not share the load, through the real engine.

Two engines' series (vLLM's `engine` label) go through the Store and the shipped catalog, one
scrape a second, as the monitor runs them; the derived signals (`kv_spread`,
`running_imbalance`, `ttft_p95_imbalance`) are also checked on their own.
"""

from __future__ import annotations

from vtop.model import Frame, Histogram, Knob, Scrape, SeriesKey
from vtop.monitor import Monitor
from vtop.triage.engine import Engine
from vtop.triage.measure import Snapshot
from vtop.triage.schema import Measure, Operand

BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
KNOBS = {"max_num_seqs": Knob("max_num_seqs", 64, "flag")}


def _hist(value: float, n: float) -> Histogram:
    return Histogram(BOUNDS, tuple(n if value <= b else 0.0 for b in BOUNDS), n, value * n)


def run(engines: list[dict[str, float]], polls: int = 300) -> tuple[Monitor, list[str]]:
    """Feed `polls` scrapes; each engine has fixed kv, running, waiting and a TTFT value."""
    monitor = Monitor(engine=Engine.from_catalog(user=False))
    states: list[str] = []
    for i in range(polls):
        scalars: dict[SeriesKey, float] = {}
        hists: dict[SeriesKey, Histogram] = {}
        for e, eng in enumerate(engines):
            for sig in ("kv_usage", "running", "waiting"):
                scalars[SeriesKey(sig, "m", str(e))] = eng[sig]
            scalars[SeriesKey("generation_tokens", "m", str(e))] = 100.0 * i
            hists[SeriesKey("ttft", "m", str(e))] = _hist(eng.get("ttft", 0.2), 2.0 * i)
        scrape = Scrape(
            "ep",
            1000.0 + i,
            latency_s=0.01,
            scalars=scalars,
            histograms=hists,
            knobs=KNOBS if i == 0 else None,
        )
        monitor.feed(Frame(scrape.t, (scrape,)))
        found = {f.rule: f.state for f in monitor.endpoints["ep"].findings}
        states.append(found.get("engine-imbalance", "-"))
    return monitor, states


FULL = {"kv_usage": 0.97, "running": 20.0, "waiting": 4.0}
EMPTY = {"kv_usage": 0.05, "running": 3.0, "waiting": 0.0}


def test_one_engine_full_while_another_is_empty_fires_after_its_evidence_and_for() -> None:
    monitor, states = run([FULL, EMPTY])
    assert "firing" not in states[:170]  # 2 min of history, then held for 1 min
    assert states[200:] == ["firing"] * 100
    f = next(f for f in monitor.endpoints["ep"].findings if f.rule == "engine-imbalance")
    assert "KV usage 92% apart" in f.summary and "6.7x the idlest" in f.summary
    snap = Snapshot(monitor.endpoints["ep"].store, KNOBS, None)
    assert snap.measure(Measure("max_over_time", Operand("kv_spread"), 0.5)) == 0.97 - 0.05
    assert snap.measure(Measure("max_over_time", Operand("running_imbalance"), 0.5)) == 20 / 3


def test_balanced_engines_light_skew_and_a_single_engine_do_not_fire() -> None:
    assert "firing" not in run([FULL, FULL])[1]
    light = {"kv_usage": 0.3, "running": 6.0, "waiting": 0.0}
    assert "firing" not in run([light, {"kv_usage": 0.1, "running": 1.0, "waiting": 0.0}])[1]
    monitor, states = run([FULL])
    assert "firing" not in states and "pending" not in states
    snap = Snapshot(monitor.endpoints["ep"].store, KNOBS, None)
    assert (
        snap.measure(Measure("max_over_time", Operand("kv_spread"), 0.5)) is None
    )  # unknown, not 0


def test_one_engine_slow_to_first_token_fires() -> None:
    slow = {"kv_usage": 0.6, "running": 10.0, "waiting": 2.0, "ttft": 2.0}
    fast = {"kv_usage": 0.6, "running": 10.0, "waiting": 2.0, "ttft": 0.2}
    monitor, states = run([slow, fast])
    assert states[-1] == "firing"
    snap = Snapshot(monitor.endpoints["ep"].store, KNOBS, None)
    ratio = snap.measure(Measure("value", Operand("ttft_p95_imbalance"), 300.0))
    assert ratio is not None and ratio > 5
