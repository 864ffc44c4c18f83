"""How far is each fast path from a false verdict? The basis of the `decisive:` windows.

A rule's fast path fires once its decisive condition has held across `decisive.evidence`
seconds (rules/README.md, "Two paths to a verdict"). Whether that is safe rests on how long
the same condition can hold on a server whose problem is another one. This bench measures it:
for every rule with a fast path, on every simulator scenario that is not that rule's (30
simulated minutes from the server's start, polled at 1 s and at 0.25 s) and on the traces of
the real vLLM CPU server in tests/fixtures/real-regimes/ whose regime is not that rule's, it
evaluates the fast path as the engine does (the decisive condition holds and the rule's own
condition does not say otherwise) at every poll, and prints the share of polls it held and
its longest unbroken run in seconds, beside the evidence the rule asks for. A longest run at
or above the evidence is a fast path that would have fired wrongly: the bench exits 1.

    .venv/bin/python bench/decisive_margin.py [--minutes 30]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.sim.scenarios import SCENARIOS
from vtop.sources.sim import SimSource
from vtop.trace.reader import TraceReader
from vtop.triage.engine import Engine
from vtop.triage.measure import Snapshot, holds
from vtop.triage.schema import Rule

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real-regimes"
EPOCH = 1_700_000_000.0
CATALOG = Engine.from_catalog(user=False).rules
RULES = [r for r in CATALOG if r.decisive is not None]
RELATED = {
    # the KV wall's two faces: on a server past its sweet spot the pool is full too
    "memory-ceiling": {"past-sweet-spot"},
    "past-sweet-spot": {"memory-ceiling"},
}
"""Problems whose servers a rule's fast path may legitimately see as its own as well. Besides
these, a symptom (ttft-queueing) holds wherever a root cause that explains it does: there it
is suppressed, never a verdict, so those servers are not counted against it."""


def excused(rule: Rule, problem: str | None) -> bool:
    """Whether `rule` holding on a server with `problem` is no false verdict."""
    if problem is None:
        return False
    cause = next((r for r in CATALOG if r.id == problem), None)
    explained = cause is not None and rule.id in cause.explains
    return problem == rule.id or problem in RELATED.get(rule.id, set()) or explained


@dataclass
class Exposure:
    polls: int = 0
    held: int = 0
    longest_s: float = 0.0
    where: str = ""


def runs(frames: list[Frame], rule: Rule) -> tuple[int, int, float]:
    """Polls, polls at which the fast path held, and its longest unbroken run in seconds."""
    monitor = Monitor(engine=Engine([]))
    assert rule.decisive is not None
    held = 0
    longest = 0.0
    start: float | None = None
    for frame in frames:
        monitor.feed(frame)
        view = next(iter(monitor.endpoints.values()))
        restarts = view.store.restarts()
        snap = Snapshot(view.store, view.knobs, restarts[-1] if restarts else None)
        ok = holds(rule.when, snap, active=False) is not False and holds(
            rule.decisive.when, snap, active=False
        )
        if ok:
            held += 1
            start = frame.t if start is None else start
            longest = max(longest, frame.t - start)
        else:
            start = None
    return len(frames), held, longest


def simulated(name: str, interval_s: float, minutes: float) -> list[Frame]:
    source = SimSource.scenario(name, seed=0, epoch=EPOCH, warm_up=False, interval_s=interval_s,
                                in_thread=False)  # fmt: skip
    return [source.poll_now() for _ in range(int(minutes * 60 / interval_s))]


def recorded(path: Path) -> list[Frame]:
    with TraceReader(path) as reader:
        return list(reader.frames(None, None))


def real_regimes() -> dict[str, str | None]:
    """Each real trace's regime and the rule it is (None: a server that is fine)."""
    out: dict[str, str | None] = {}
    readme = REAL / "README.md"
    if not readme.exists():
        return out
    for line in readme.read_text().splitlines():
        # | `kv.vtrace` | memory-ceiling | … : the table rows of the README
        cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
        if len(cells) >= 2 and cells[0].endswith(".vtrace"):
            rule = cells[1].split()[0]  # "past-sweet-spot (pending)": still that problem
            out[cells[0]] = None if rule in ("none", "–") else rule
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="per scenario and interval")
    args = parser.parse_args(argv)
    sources: list[tuple[str, str | None, list[Frame]]] = []
    for name, sc in SCENARIOS.items():
        for interval in (1.0, 0.25):
            minutes = args.minutes if interval >= 1 else args.minutes / 3
            sources.append((f"sim {name} @{interval:g}s", sc.rule, simulated(name, interval,
                                                                            minutes)))  # fmt: skip
    for trace, cause in real_regimes().items():
        sources.append((f"real {trace}", cause, recorded(REAL / trace)))
    ok = True
    print(f"{'rule':24s} {'evidence':>8s} {'held (other problems)':>22s} {'longest run':>12s}  "
          "where")  # fmt: skip
    for rule in RULES:
        assert rule.decisive is not None
        ex = Exposure()
        for label, own, frames in sources:
            if excused(rule, own):
                continue
            polls, held, longest = runs(frames, rule)
            ex.polls += polls
            ex.held += held
            if longest >= ex.longest_s and held:
                ex.longest_s, ex.where = longest, label
        wrong = ex.longest_s >= rule.decisive.evidence_s
        ok = ok and not wrong
        share = ex.held / ex.polls if ex.polls else 0.0
        print(
            f"{rule.id:24s} {rule.decisive.evidence_s:>7.0f}s {share:>21.2%} "
            f"{ex.longest_s:>11.1f}s  {ex.where or '-'}{'  WOULD FIRE WRONGLY' if wrong else ''}"
        )
    print("\nevery fast path short of a false verdict" if ok else "\nFAILED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
