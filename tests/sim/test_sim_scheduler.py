"""The scheduler core against vLLM V1's rules, one behaviour per test."""

from __future__ import annotations

import pytest

from vtop.sim.scheduler import Request, Scheduler, SchedulerConfig


def sched(
    *,
    max_num_seqs: int = 8,
    max_num_batched_tokens: int = 64,
    block_size: int = 4,
    num_gpu_blocks: int = 64,
    max_model_len: int = 4096,
    long_prefill_token_threshold: int = 0,
    enable_prefix_caching: bool = False,
) -> Scheduler:
    """A small scheduler: 8 seats, 64 tokens a step, 64 blocks of 4 (one of them vLLM's null
    block, so 63 for requests)."""
    return Scheduler(
        SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            block_size=block_size,
            num_gpu_blocks=num_gpu_blocks,
            max_model_len=max_model_len,
            long_prefill_token_threshold=long_prefill_token_threshold,
            enable_prefix_caching=enable_prefix_caching,
        )
    )


def step(s: Scheduler, t: float) -> tuple[list[tuple[int, int]], list[int]]:
    """One step: [(rid, tokens)], [finished rids]."""
    plan = s.schedule()
    got = [(r.rid, n) for r, n in zip(plan.reqs, plan.ntokens, strict=True)]
    res = s.complete(t)
    s.check()
    return got, [r.rid for r in res.finished]


def test_chunked_prefill_then_one_token_per_step() -> None:
    s = sched(max_num_batched_tokens=32)
    s.add(Request(0, prompt_len=100, output_len=3), 0.0)
    chunks = [step(s, t)[0] for t in range(1, 8)]
    assert chunks[:4] == [[(0, 32)], [(0, 32)], [(0, 32)], [(0, 4)]]
    assert chunks[4:6] == [[(0, 1)], [(0, 1)]]
    assert chunks[6] == []  # finished after 3 outputs: the prefill's token plus 2 decodes


def test_long_prefill_token_threshold_caps_each_chunk() -> None:
    s = sched(max_num_batched_tokens=64, long_prefill_token_threshold=16)
    s.add(Request(0, prompt_len=40, output_len=2), 0.0)
    s.add(Request(1, prompt_len=10, output_len=2), 0.0)
    first, _ = step(s, 1)
    assert first == [(0, 16), (1, 10)]  # the short one is admitted beside the long one


def test_running_decodes_go_first_then_prefill_fills_the_budget() -> None:
    s = sched(max_num_batched_tokens=16)
    s.add(Request(0, prompt_len=4, output_len=10), 0.0)
    step(s, 1)
    s.add(Request(1, prompt_len=40, output_len=2), 1.0)
    got, _ = step(s, 2)
    assert got == [(0, 1), (1, 15)]


def test_running_is_capped_by_max_num_seqs() -> None:
    s = sched(max_num_seqs=3)
    for i in range(6):
        s.add(Request(i, prompt_len=2, output_len=5), 0.0)
    got, _ = step(s, 1)
    assert [rid for rid, _ in got] == [0, 1, 2]
    assert len(s.running) == 3 and len(s.waiting) == 3


def test_finish_frees_the_slot_for_the_next_step() -> None:
    s = sched(max_num_seqs=1)
    s.add(Request(0, prompt_len=1, output_len=1), 0.0)
    s.add(Request(1, prompt_len=1, output_len=1), 0.0)
    assert step(s, 1) == ([(0, 1)], [0])
    assert step(s, 2) == ([(1, 1)], [1])


def test_preemption_evicts_the_newest_and_requeues_it_at_the_front() -> None:
    # 6 blocks of 4 tokens for requests (and the null block). Three requests of 8-token prompts
    # take 2 blocks each.
    s = sched(num_gpu_blocks=7, max_num_batched_tokens=64)
    for i in range(3):
        s.add(Request(i, prompt_len=8, output_len=20), 0.0)
    s.add(Request(9, prompt_len=4, output_len=2), 0.0)  # waits: no block left
    step(s, 1)
    assert [r.rid for r in s.running] == [0, 1, 2] and s.pool.free == 0
    # Next step every request needs a 3rd block for token 9. Request 0 preempts the newest (2),
    # whose two freed blocks then also cover request 1.
    plan = s.schedule()
    assert [r.rid for r in plan.preempted] == [2]
    assert [r.rid for r in plan.reqs] == [0, 1]
    assert [r.rid for r in s.waiting] == [2, 9]  # back at the FRONT of the queue
    victim = plan.preempted[0]
    assert victim.num_computed == 0 and victim.num_preemptions == 1
    assert victim.private_blocks == 0
    assert not plan.admitted  # no admission in a step that preempted
    s.complete(2.0)
    s.check()
    assert s.num_preemptions == 1
    # Step 3: both need a 4th block only at token 13, so nothing frees; the victim waits.
    got, _ = step(s, 3)
    assert [rid for rid, _ in got] == [0, 1] and [r.rid for r in s.waiting] == [2, 9]


def test_a_request_that_is_its_own_victim_stops_the_running_loop() -> None:
    s = sched(num_gpu_blocks=3, max_num_batched_tokens=64)  # 2 blocks for requests
    s.add(Request(0, prompt_len=8, output_len=5), 0.0)
    step(s, 1)
    plan = s.schedule()  # needs a third block; the only candidate is itself
    assert plan.reqs == [] and [r.rid for r in plan.preempted] == [0]
    assert next(iter(s.waiting)).rid == 0


def test_waiting_head_that_does_not_fit_blocks_those_behind_it() -> None:
    s = sched(num_gpu_blocks=4, max_num_batched_tokens=64)
    s.add(Request(0, prompt_len=20, output_len=2), 0.0)  # needs 5 blocks
    s.add(Request(1, prompt_len=2, output_len=2), 0.0)
    got, _ = step(s, 1)
    assert got == []  # FCFS: the small one does not jump the queue


def test_finish_reason_length_when_max_tokens_reached_else_stop() -> None:
    assert Request(0, 5, 10, max_tokens=10).finish_reason == "length"
    assert Request(1, 5, 7, max_tokens=10).finish_reason == "stop"
    assert Request(2, 5, 7).finish_reason == "length"


def test_prefix_cache_hits_are_whole_blocks_counted_in_tokens() -> None:
    s = sched(enable_prefix_caching=True, block_size=4)
    s.add(Request(0, prompt_len=20, output_len=2, prefix_key=7, prefix_blocks=3), 0.0)
    step(s, 1)
    assert (s.prefix_queries, s.prefix_hits) == (20, 0)
    s.add(Request(1, prompt_len=22, output_len=2, prefix_key=7, prefix_blocks=3), 1.0)
    got, _ = step(s, 2)
    assert (1, 22 - 12) in got  # 3 shared blocks = 12 tokens not recomputed
    assert (s.prefix_queries, s.prefix_hits) == (42, 12)
    r1 = s.running[-1]
    assert r1.num_cached_tokens == 12 and r1.shared_blocks == 3


def test_full_prompt_hit_still_recomputes_the_last_token() -> None:
    s = sched(enable_prefix_caching=True, block_size=4)
    s.add(Request(0, prompt_len=13, output_len=3, prefix_key=1, prefix_blocks=3), 0.0)
    step(s, 1)
    s.add(Request(1, prompt_len=12, output_len=2, prefix_key=1, prefix_blocks=3), 1.0)
    got, _ = step(s, 2)
    # 12 tokens, all in cached blocks: at most 11 may hit, so only 2 whole blocks (8 tokens).
    assert (1, 4) in got


def test_shared_prefix_blocks_are_counted_once() -> None:
    s = sched(enable_prefix_caching=True, block_size=4, num_gpu_blocks=64)
    s.add(Request(0, prompt_len=16, output_len=5, prefix_key=3, prefix_blocks=4), 0.0)
    step(s, 1)
    used_one = s.pool.used
    s.add(Request(1, prompt_len=17, output_len=5, prefix_key=3, prefix_blocks=4), 1.0)
    step(s, 2)
    assert s.pool.used == used_one + 2  # only its own tail blocks


def test_preempted_requests_do_not_count_in_prefix_stats() -> None:
    s = sched(enable_prefix_caching=True, num_gpu_blocks=5, max_num_batched_tokens=64)
    s.add(Request(0, prompt_len=8, output_len=20), 0.0)
    s.add(Request(1, prompt_len=8, output_len=20), 0.0)
    step(s, 1)
    queries = s.prefix_queries
    for t in range(2, 6):
        step(s, t)
    assert s.num_preemptions >= 1
    assert s.prefix_queries == queries  # re-admissions after preemption are not queries


def test_the_null_block_is_held_by_no_request() -> None:
    """vLLM's BlockPool keeps one block as its null block: 5 blocks hold 4 of a request's, and
    usage is read over those 4."""
    s = sched(num_gpu_blocks=5, max_num_batched_tokens=64)
    s.add(Request(0, prompt_len=20, output_len=2), 0.0)  # 5 blocks: one more than there are
    s.add(Request(1, prompt_len=16, output_len=2), 0.0)
    got, _ = step(s, 1)
    assert got == []  # the head waits, and the one behind it waits with it (FCFS)
    s = sched(num_gpu_blocks=5, max_num_batched_tokens=64)
    s.add(Request(0, prompt_len=16, output_len=2), 0.0)  # 4 blocks: all a request may hold
    got, _ = step(s, 1)
    assert got == [(0, 16)] and s.pool.free == 0 and s.pool.usage == 1.0


def test_budget_must_cover_max_num_seqs() -> None:
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        SchedulerConfig(max_num_seqs=100, max_num_batched_tokens=64)
