"""vLLM V1's scheduler, step by step: the part of the twin every symptom comes from.

Modelled on `vllm/v1/core/sched/scheduler.py` (`Scheduler.schedule` and `update_from_output`)
and `vllm/v1/core/kv_cache_manager.py`:

- There is no prefill or decode phase. A request has `num_computed` and `num_tokens` (prompt
  plus outputs so far); each step the scheduler gives it tokens so that `num_computed` catches
  up. When it has caught up, the step samples one output token.
- Token budget: `max_num_batched_tokens` per step. RUNNING requests are served first, in
  order; each gets `min(remaining, long_prefill_token_threshold if set, budget left)` tokens.
- KV blocks (`block_size` tokens each) are allocated as tokens are scheduled
  (`allocate_slots`); allocation fails when the pool's free blocks (cached-but-evictable ones
  included) are fewer than the new blocks plus the evictable cached blocks being reused.
- A running request whose allocation fails preempts `self.running.pop()`, the most recently
  admitted one (FCFS policy), until it fits or is itself the victim: the victim's blocks are
  freed, `num_computed` resets to 0 (recompute), `num_preemptions` grows, and it goes back to
  the FRONT of the waiting queue (`prepend_request`).
- WAITING requests are admitted only if nothing was preempted this step
  (`if not preempted_reqs:`), FCFS from the head, while the budget lasts and `running` is below
  `max_num_seqs`; the first that cannot get its blocks stops admission (`break`). A new
  request first looks up the prefix cache: hits are whole blocks, at most `num_tokens - 1`
  tokens (the last token is always recomputed for its logits). The lookup is recorded in the
  prefix-cache stats (queries += num_tokens, hits += hit tokens) every time the head is peeked,
  unless the request was preempted before (`PrefixCacheStats.record(preempted=...)`).
- Finished requests (output length reached) free their blocks after the step.
- One block is the pool's null block (`BlockPool.null_block`), held by no request: requests
  share `num_gpu_blocks - 1`, and KV usage is read over those.

Not modelled: speculative decoding, LoRA and structured-output deferrals (the "deferred"
waiting reason stays 0), encoder inputs, KV connectors, the priority policy, async scheduling,
and the `can_fit_full_sequence` admission gate that some recent builds add.

Everything here is counted in tokens and blocks, never per token: one step costs a few
integer operations per scheduled request.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vtop import knobs
from vtop.sim.kvcache import KVPool

_GPU_DEFAULTS = knobs.scheduler_defaults(None, None)

FINISH_STOP = "stop"
FINISH_LENGTH = "length"


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The knobs `vllm serve` takes that shape scheduling (vLLM's defaults on a GPU under 70 GiB,
    `vtop.knobs`; the pool and context sizes are a mid-size model's)."""

    max_num_seqs: int = _GPU_DEFAULTS.max_num_seqs
    max_num_batched_tokens: int = _GPU_DEFAULTS.max_num_batched_tokens
    block_size: int = knobs.BLOCK_SIZE
    num_gpu_blocks: int = 8192
    max_model_len: int = 32768
    long_prefill_token_threshold: int = 0
    enable_prefix_caching: bool = knobs.PREFIX_CACHING
    enable_chunked_prefill: bool = True

    def __post_init__(self) -> None:
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs})"
            )
        if self.block_size <= 0 or self.num_gpu_blocks <= 0 or self.max_num_seqs <= 0:
            raise ValueError("block_size, num_gpu_blocks and max_num_seqs must be positive")


class Request:
    """One request inside the engine (plus the timestamps vLLM's metrics are built from)."""

    __slots__ = (
        "arrival_ts",
        "client",
        "finish_reason",
        "first_token_ts",
        "last_token_ts",
        "max_tokens",
        "num_cached_tokens",
        "num_computed",
        "num_output",
        "num_preemptions",
        "output_len",
        "prefix_blocks",
        "prefix_key",
        "private_blocks",
        "prompt_len",
        "published",
        "queued_ts",
        "rid",
        "scheduled_ts",
        "shared_blocks",
        "tag",
    )

    def __init__(
        self,
        rid: int,
        prompt_len: int,
        output_len: int,
        *,
        max_tokens: int | None = None,
        finish_reason: str | None = None,
        prefix_key: int = -1,
        prefix_blocks: int = 0,
        arrival_ts: float = 0.0,
        client: int = -1,
        tag: int = 0,
    ) -> None:
        if prompt_len < 1 or output_len < 1:
            raise ValueError(f"request {rid}: prompt and output need at least one token")
        self.rid = rid
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.max_tokens = max_tokens if max_tokens is not None else output_len
        if finish_reason is None:
            finish_reason = FINISH_LENGTH if output_len >= self.max_tokens else FINISH_STOP
        self.finish_reason = finish_reason
        self.prefix_key = prefix_key
        self.prefix_blocks = prefix_blocks
        self.arrival_ts = arrival_ts
        self.client = client
        self.tag = tag
        self.num_computed = 0
        self.num_output = 0
        self.private_blocks = 0
        self.shared_blocks = 0
        self.published = False
        self.num_preemptions = 0
        self.num_cached_tokens = -1
        self.queued_ts = 0.0
        self.scheduled_ts = -1.0
        self.first_token_ts = -1.0
        self.last_token_ts = -1.0

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.num_output

    def __repr__(self) -> str:
        return (
            f"Request({self.rid}, prompt={self.prompt_len}, out={self.num_output}/"
            f"{self.output_len}, computed={self.num_computed})"
        )


class StepPlan:
    """What one `schedule()` decided; reused between steps to avoid allocation.

    `head_queries` / `head_hits`: the prefix-cache lookup of a queue head that could not be
    admitted (0 when none was counted); a steady decode run repeats it every step.
    """

    __slots__ = (
        "admitted",
        "attn_pairs",
        "context_tokens",
        "head_hits",
        "head_queries",
        "ntokens",
        "preempted",
        "reqs",
        "samples",
        "total_tokens",
    )

    def __init__(self) -> None:
        self.reqs: list[Request] = []
        self.ntokens: list[int] = []
        self.preempted: list[Request] = []
        self.admitted: list[Request] = []
        self.total_tokens = 0
        self.context_tokens = 0
        self.attn_pairs = 0.0
        self.samples = 0
        self.head_queries = 0
        self.head_hits = 0

    def clear(self) -> None:
        self.reqs.clear()
        self.ntokens.clear()
        self.preempted.clear()
        self.admitted.clear()
        self.total_tokens = 0
        self.context_tokens = 0
        self.attn_pairs = 0.0
        self.samples = 0
        self.head_queries = 0
        self.head_hits = 0


class StepResult:
    """What one step produced: tokens, first tokens, finished requests, inter-token latencies.

    `itl_same` requests also decoded in the previous step (their inter-token latency is the
    time since that step ended); `itl_other` holds the others' latencies one by one.
    """

    __slots__ = (
        "finished",
        "first_tokens",
        "generated",
        "itl_other",
        "itl_same",
        "prompt_tokens_done",
    )

    def __init__(self) -> None:
        self.generated = 0
        self.prompt_tokens_done = 0
        self.itl_same = 0
        self.itl_other: list[float] = []
        self.first_tokens: list[Request] = []
        self.finished: list[Request] = []

    def clear(self) -> None:
        self.generated = 0
        self.prompt_tokens_done = 0
        self.itl_same = 0
        self.itl_other.clear()
        self.first_tokens.clear()
        self.finished.clear()


class Scheduler:
    """FCFS continuous batching with chunked prefill, recompute preemption and prefix caching."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        # vLLM's BlockPool takes one block off the free queue as the null block (a placeholder
        # no request holds) and reports usage over the rest (`get_usage`): a request may hold
        # one block fewer than `num_gpu_blocks`, which is 4 % of a 24-block pool.
        self.pool = KVPool(max(1, config.num_gpu_blocks - 1))
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.plan = StepPlan()
        self.result = StepResult()
        # Counters harvested by the engine's stats.
        self.num_preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.prefix_requests = 0

    # --- queue ---------------------------------------------------------------------------------

    def add(self, req: Request, now: float) -> None:
        req.queued_ts = now
        self.waiting.append(req)

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # --- schedule ------------------------------------------------------------------------------

    def schedule(self) -> StepPlan:
        cfg = self.config
        bs = cfg.block_size
        thr = cfg.long_prefill_token_threshold
        pool = self.pool
        plan = self.plan
        plan.clear()
        reqs = plan.reqs
        ntokens = plan.ntokens
        budget = cfg.max_num_batched_tokens
        context = 0
        pairs = 0.0
        samples = 0
        running = self.running

        # First, the RUNNING requests.
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            c = r.num_computed
            remaining = r.prompt_len + r.num_output - c
            n = remaining
            if 0 < thr < n:
                n = thr
            n = min(n, budget)
            held = r.private_blocks + r.shared_blocks
            need = (c + n + bs - 1) // bs - held
            if need > 0:
                scheduled = True
                while need > pool.free:
                    victim = running.pop()
                    self._preempt(victim)
                    if victim is r:
                        scheduled = False
                        break
                if not scheduled:
                    break
                pool.allocate(need)
                r.private_blocks += need
            reqs.append(r)
            ntokens.append(n)
            budget -= n
            context += c + n
            pairs += n * (c + (n + 1) * 0.5)
            if n == remaining:
                samples += 1
            i += 1

        # Next, the WAITING requests, unless this step preempted.
        if not plan.preempted:
            waiting = self.waiting
            cap = cfg.max_num_seqs
            caching = cfg.enable_prefix_caching
            while waiting and budget > 0 and len(running) < cap:
                r = waiting[0]
                num_tokens = r.prompt_len + r.num_output
                hit_blocks = 0
                group_blocks = 0
                self_key = -1 - r.rid
                self_blocks = 0
                touched = 0
                if caching:
                    max_hit = (num_tokens - 1) // bs
                    if r.prefix_key >= 0:
                        entry = pool.lookup(r.prefix_key)
                        if entry is not None:
                            group_blocks = min(entry.blocks, r.prefix_blocks, max_hit)
                            if group_blocks > 0:
                                touched += pool.evictable_blocks_of(r.prefix_key)
                    hit_blocks = group_blocks
                    if r.num_preemptions:
                        own = pool.lookup(self_key)
                        if own is not None:
                            if own.start == group_blocks and group_blocks < max_hit:
                                self_blocks = min(own.blocks, max_hit - group_blocks)
                                hit_blocks += self_blocks
                                touched += own.blocks
                            else:
                                pool.discard(self_key)
                    if r.num_preemptions == 0:
                        self.prefix_requests += 1
                        self.prefix_queries += num_tokens
                        self.prefix_hits += hit_blocks * bs
                        plan.head_queries = num_tokens
                        plan.head_hits = hit_blocks * bs
                hit = hit_blocks * bs
                n = num_tokens - hit
                if 0 < thr < n:
                    n = thr
                if not cfg.enable_chunked_prefill and n > budget:
                    break
                n = min(n, budget)
                need = (hit + n + bs - 1) // bs - hit_blocks
                if need + touched > pool.free:
                    break
                waiting.popleft()
                plan.head_queries = 0
                plan.head_hits = 0
                if group_blocks > 0:
                    r.shared_blocks = pool.acquire(r.prefix_key, group_blocks)
                if self_blocks > 0:
                    r.private_blocks += pool.take(self_key)
                    extra = r.private_blocks - self_blocks
                    if extra > 0:  # cached run longer than reusable: give the tail back
                        pool.release(extra)
                        r.private_blocks = self_blocks
                pool.allocate(need)
                r.private_blocks += need
                r.num_computed = hit
                if r.num_cached_tokens < 0:
                    r.num_cached_tokens = hit
                running.append(r)
                plan.admitted.append(r)
                reqs.append(r)
                ntokens.append(n)
                budget -= n
                context += hit + n
                pairs += n * (hit + (n + 1) * 0.5)
                if n == num_tokens - hit:
                    samples += 1

        plan.total_tokens = cfg.max_num_batched_tokens - budget
        plan.context_tokens = context
        plan.attn_pairs = pairs
        plan.samples = samples
        return plan

    def _preempt(self, victim: Request) -> None:
        """Recompute preemption: free everything, reset progress, back to the queue's front."""
        pool = self.pool
        bs = self.config.block_size
        if victim.shared_blocks:
            pool.unref(victim.prefix_key)
        private = victim.private_blocks
        pool.release(private)
        if self.config.enable_prefix_caching:
            full = victim.num_computed // bs - victim.shared_blocks
            keep = min(private, max(0, full))
            pool.stash(-1 - victim.rid, keep, victim.shared_blocks)
        victim.private_blocks = 0
        victim.shared_blocks = 0
        victim.published = False
        victim.num_computed = 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(victim)
        self.plan.preempted.append(victim)

    # --- update after the step ------------------------------------------------------------------

    def complete(self, t_end: float, prev_end: float = -1.0) -> StepResult:
        """Apply the plan: advance computed tokens, sample, finish. `t_end` stamps the outputs;
        `prev_end` is when the previous step ended (for inter-token latencies)."""
        plan = self.plan
        res = self.result
        res.clear()
        pool = self.pool
        bs = self.config.block_size
        caching = self.config.enable_prefix_caching
        finished = res.finished
        itl_other = res.itl_other
        itl_same = 0
        generated = 0
        for r, n in zip(plan.reqs, plan.ntokens, strict=True):
            c = r.num_computed + n
            r.num_computed = c
            if caching and not r.published and r.prefix_key >= 0:
                self._maybe_publish(r, c, bs)
            if c < r.prompt_len + r.num_output:
                continue  # a prefill chunk: no token yet
            r.num_output += 1
            generated += 1
            if r.first_token_ts < 0:
                r.first_token_ts = t_end
                res.first_tokens.append(r)
                res.prompt_tokens_done += r.prompt_len
            elif r.last_token_ts == prev_end:
                itl_same += 1
            else:
                itl_other.append(t_end - r.last_token_ts)
            r.last_token_ts = t_end
            if r.num_output >= r.output_len:
                finished.append(r)
        res.generated = generated
        res.itl_same = itl_same
        if finished:
            done = {id(r) for r in finished}
            self.running = [r for r in self.running if id(r) not in done]
            for r in finished:
                if r.shared_blocks:
                    pool.unref(r.prefix_key)
                pool.release(r.private_blocks)
                r.private_blocks = 0
                r.shared_blocks = 0
        return res

    def _maybe_publish(self, r: Request, computed: int, bs: int) -> None:
        if r.shared_blocks:
            r.published = True
            return
        if computed < r.prefix_blocks * bs or r.prefix_blocks == 0:
            return
        r.published = True
        if self.pool.publish(r.prefix_key, r.prefix_blocks):
            r.private_blocks -= r.prefix_blocks
            r.shared_blocks = r.prefix_blocks

    # --- invariants (tests and debugging) -------------------------------------------------------

    def check(self) -> None:
        """Raise AssertionError if an accounting invariant is broken."""
        pool = self.pool
        cfg = self.config
        assert len(self.running) <= cfg.max_num_seqs, "running exceeds max_num_seqs"
        assert 0 <= pool.used <= pool.total, f"used {pool.used} outside 0..{pool.total}"
        assert pool.used + pool.evictable <= pool.total, "cached blocks exceed the pool"
        private = sum(r.private_blocks for r in self.running)
        shared = sum(e.blocks for e in pool.entries.values() if e.refs > 0)
        assert private + shared == pool.used, f"{private}+{shared} != used {pool.used}"
        for r in self.running:
            held = r.private_blocks + r.shared_blocks
            assert held * cfg.block_size >= r.num_computed, f"{r} holds too few blocks"
        for r in self.waiting:
            assert r.private_blocks == 0 and r.shared_blocks == 0, f"waiting {r} holds blocks"
