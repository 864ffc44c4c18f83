"""The seed's reference simulation (continuous-batching lesson §4), reproduced exactly.

12 requests needing 2,12,3,2,10,2,4,2,8,3,2,6 steps on 4 slots: static batching takes 30 steps
with 56 of 120 slot-steps useful, continuous batching 18 steps with 56 of 72. The twin runs them
through its own scheduler, engine loop and /metrics page in unit-step mode (one engine step per
virtual second): continuous batching is the plain V1 scheduler with max_num_seqs 4; static
batching is a client that sends waves of 4 and waits for each whole wave.
"""

from __future__ import annotations

from collections import deque

from prometheus_client.parser import text_string_to_metric_families

from tests.sim.helpers import unit_twin
from vtop.sim.workload import Fixed, Waves

LENGTHS = (2, 12, 3, 2, 10, 2, 4, 2, 8, 3, 2, 6)
SLOTS = 4


def _page_numbers(page: bytes) -> tuple[float, float]:
    """(engine steps that produced output, generated tokens) read back from /metrics."""
    steps = tokens = -1.0
    for fam in text_string_to_metric_families(page.decode()):
        for s in fam.samples:
            if s.name == "vllm:iteration_tokens_total_count":
                steps = s.value
            if s.name == "vllm:generation_tokens_total":
                tokens = s.value
    return steps, tokens


def _run(twin_workload: Fixed | Waves) -> tuple[int, int, int]:
    twin = unit_twin(twin_workload, max_num_seqs=SLOTS)
    twin.advance(100)
    st = twin.engine.stats
    makespan = twin.engine.prev_end
    useful = st.generation_tokens  # a one-token prompt: every busy slot-step yields a token
    assert st.steps == makespan
    assert sum(st.request_success.values()) == len(LENGTHS)
    steps, tokens = _page_numbers(twin.metrics_text())
    assert (steps, tokens) == (st.steps, useful)
    return int(makespan), int(useful), int(makespan) * SLOTS


def test_continuous_batching_matches_the_seed() -> None:
    wl = Fixed(tuple((0.0, 1, n) for n in LENGTHS))
    makespan, useful, total = _run(wl)
    assert (makespan, useful, total) == (18, 56, 72)
    assert f"{useful / total:.1%}" == "77.8%"


def test_static_batching_matches_the_seed() -> None:
    wl = Waves(wave_size=SLOTS, script=tuple((1, n) for n in LENGTHS))
    makespan, useful, total = _run(wl)
    assert (makespan, useful, total) == (30, 56, 120)
    assert f"{useful / total:.1%}" == "46.7%"


def _seed_static(requests: list[tuple[str, int]], slots: int) -> tuple[int, int, int]:
    """The seed's own `static_batching`, as printed in §4 (the cross-check)."""
    q = deque(requests)
    busy = total = step = 0
    while q:
        batch = [q.popleft() for _ in range(min(slots, len(q)))]
        remaining = dict(batch)
        while any(r > 0 for r in remaining.values()):
            step += 1
            for rid in remaining:  # noqa: PLC0206 (the seed code as printed)
                if remaining[rid] > 0:
                    remaining[rid] -= 1
                    busy += 1
            total += slots
    return step, busy, total


def _seed_continuous(requests: list[tuple[str, int]], slots: int) -> tuple[int, int, int]:
    """The seed's own `continuous_batching`, as printed in §4."""
    waiting = deque(requests)
    running: dict[str, int] = {}
    busy = total = step = 0
    while waiting or running:
        while waiting and len(running) < slots:
            rid, n = waiting.popleft()
            running[rid] = n
        step += 1
        for rid in running:
            running[rid] -= 1
            busy += 1
        running = {rid: n for rid, n in running.items() if n > 0}
        total += slots
    return step, busy, total


def test_twin_agrees_with_the_seed_code_on_other_workloads() -> None:
    """Not just the one printed case: random length lists agree too."""
    import random

    rng = random.Random(7)
    for _ in range(20):
        lengths = [rng.randint(1, 15) for _ in range(rng.randint(1, 14))]
        slots = rng.randint(1, 5)
        reqs = [(f"R{i}", n) for i, n in enumerate(lengths)]
        for wl, seed_fn in (
            (Fixed(tuple((0.0, 1, n) for n in lengths)), _seed_continuous),
            (Waves(wave_size=slots, script=tuple((1, n) for n in lengths)), _seed_static),
        ):
            twin = unit_twin(wl, max_num_seqs=slots)
            twin.advance(500)
            st = twin.engine.stats
            got = (int(twin.engine.prev_end), int(st.generation_tokens))
            want = seed_fn(reqs, slots)
            assert got == want[:2], (lengths, slots, seed_fn.__name__)
