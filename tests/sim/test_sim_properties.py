"""Scheduler invariants on random workloads and knobs (hypothesis).

Whatever arrives, at every step: no more running requests than max_num_seqs, no more scheduled
tokens than max_num_batched_tokens, KV blocks never over capacity and exactly accounted for,
preempted requests back at the front of the queue in the order vLLM puts them there, and no
request lost or duplicated. And the engine drains: every request finishes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vtop.sim.scheduler import Request, Scheduler, SchedulerConfig


@st.composite
def configs(draw: st.DrawFn) -> SchedulerConfig:
    seqs = draw(st.integers(1, 8))
    bs = draw(st.sampled_from([1, 2, 4, 16]))
    budget = draw(st.integers(seqs, 96))
    # The pool must hold one maximal request (prompt 60 + output 30), as vLLM checks at start,
    # besides its null block (held by no request).
    blocks = draw(st.integers((90 + bs - 1) // bs + 1, (400 + bs - 1) // bs + 1))
    return SchedulerConfig(
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        block_size=bs,
        num_gpu_blocks=blocks,
        max_model_len=4096,
        long_prefill_token_threshold=draw(st.sampled_from([0, 0, 8, 32])),
        enable_prefix_caching=draw(st.booleans()),
    )


requests = st.lists(
    st.tuples(
        st.integers(0, 6),  # arrival step
        st.integers(1, 60),  # prompt
        st.integers(1, 30),  # output
        st.integers(-1, 2),  # prefix group (-1: none)
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs(), reqs=requests)
def test_invariants_hold_and_everything_finishes(
    cfg: SchedulerConfig, reqs: list[tuple[int, int, int, int]]
) -> None:
    s = Scheduler(cfg)
    pending = sorted(
        (
            (t, Request(i, p, o, prefix_key=g, prefix_blocks=min(p - 1, 16) // cfg.block_size))
            for i, (t, p, o, g) in enumerate(reqs)
        ),
        key=lambda x: (x[0], x[1].rid),
    )
    finished: set[int] = set()
    step = 0
    limit = 40 + sum(p + o for _, p, o, _ in reqs) * 4
    while pending or s.has_work:
        assert step < limit, "the engine stopped making progress"
        while pending and pending[0][0] <= step:
            s.add(pending.pop(0)[1], float(step))
        step += 1
        running_before = list(s.running)
        plan = s.schedule()
        # Budget and width.
        assert sum(plan.ntokens) == plan.total_tokens <= cfg.max_num_batched_tokens
        assert all(n > 0 for n in plan.ntokens)
        if cfg.long_prefill_token_threshold > 0:
            assert all(n <= cfg.long_prefill_token_threshold for n in plan.ntokens)
        assert len(s.running) <= cfg.max_num_seqs
        # Preemption: victims are the newest running requests, newest first, and sit at the
        # front of the queue with the last victim first.
        if plan.preempted:
            k = len(plan.preempted)
            assert plan.preempted == running_before[::-1][:k]
            assert list(s.waiting)[:k] == plan.preempted[::-1]
            assert all(r.num_computed == 0 and r.private_blocks == 0 for r in plan.preempted)
            assert not plan.admitted
        res = s.complete(float(step))
        s.check()
        for r in res.finished:
            assert r.rid not in finished
            assert r.num_output == r.output_len
            finished.add(r.rid)
        # Nothing lost or duplicated.
        live = [r.rid for r in s.running] + [r.rid for r in s.waiting]
        assert len(live) == len(set(live))
        assert not set(live) & finished
    assert finished == set(range(len(reqs)))
    assert s.pool.used == 0
