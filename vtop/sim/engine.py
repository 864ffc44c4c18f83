"""The engine loop in virtual time: clients -> API server -> scheduler -> roofline -> metrics.

`advance_to(t)` runs as fast as the CPU allows: it steps the scheduler, prices each step with
the roofline, and jumps over idle time straight to the next arrival. Nothing depends on how
`advance_to` calls are chunked: every event is processed at its own timestamp, so
`advance_to(10)` and ten `advance_to(+1)` produce the same state. A step is indivisible, so
the engine clock may end a little past the target, but the API server (and so every metric)
only advances to the target itself.

Speed. A step costs a few integer operations per scheduled request and no per-token work:
inter-token latencies are recorded as (value, count) pairs, and when the batch is in a steady
all-decode state (nothing can be admitted, nothing finishes, no arrival and no API-server
activity is due, and the KV pool covers every block the batch will need) the engine takes up
to `bs` such steps at once, pricing each with the same roofline (`_decode_run`). The result is
identical to stepping one by one except that those steps' outputs reach the API server as one
batch.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from vtop.sim.frontend import Frontend, FrontendSpec, StepRecord
from vtop.sim.hardware import Preset, StepCost
from vtop.sim.scheduler import Request, Scheduler, SchedulerConfig
from vtop.sim.stats import Stats
from vtop.sim.workload import Clients, Workload

MAX_RUN = 64
"""Most decode steps taken at once (bounds how coarse the API server's view becomes)."""

RUN_GRID_S = 0.25
"""Decode runs never cross a multiple of this many virtual seconds."""

COMPLETIONS = "/v1/completions"
"""The handler the twin's clients call."""

HTTP_REQUEST_BYTES = 180
HTTP_RESPONSE_BYTES = 320
"""JSON overhead of a completion request / response; text adds ~4 bytes per token."""

RATE_WINDOW_S = 5.0
"""V0's local logging interval, over which its avg throughput gauges are computed."""


class BusyMeter:
    """Kernel-busy intervals of the GPU, for NVML-style utilisation over the last second."""

    __slots__ = ("_spans", "horizon", "total")

    def __init__(self, horizon: float = 2.0) -> None:
        self._spans: deque[tuple[float, float, float]] = deque()
        self.horizon = horizon
        self.total = 0.0

    def add(self, t0: float, t1: float, frac: float = 1.0) -> None:
        """The GPU was busy for `frac` of [t0, t1]."""
        if t1 <= t0 or frac <= 0:
            return
        self._spans.append((t0, t1, frac))
        self.total += (t1 - t0) * frac
        spans = self._spans
        cutoff = t1 - self.horizon
        while spans and spans[0][1] < cutoff:
            spans.popleft()

    def busy_share(self, t_from: float, t_to: float) -> float:
        """Share of [t_from, t_to] during which a kernel ran."""
        if t_to <= t_from:
            return 0.0
        busy = 0.0
        for a, b, frac in self._spans:
            lo = a if a > t_from else t_from
            hi = b if b < t_to else t_to
            if hi > lo:
                busy += (hi - lo) * frac
        return min(1.0, busy / (t_to - t_from))


class FinishedLog:
    """Per-request outcomes, kept only when a bench asks for them."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[tuple[int, float, float, float, float, int, int]] = []
        """(tag, finish time, ttft, e2e, queue, prompt_len, preemptions)."""


class Engine:
    """One vLLM engine (API server + engine core) on one device, in virtual seconds."""

    def __init__(
        self,
        preset: Preset,
        config: SchedulerConfig,
        workload: Workload,
        *,
        seed: int,
        frontend: FrontendSpec,
        grids: dict[str, list[float]],
        keep_finished: bool = False,
    ) -> None:
        self.preset = preset
        self.config = config
        self.sched = Scheduler(config)
        self.cost = StepCost(preset)
        self.clients = Clients(
            workload, seed, max_model_len=config.max_model_len, block_size=config.block_size
        )
        self.fe = Frontend(frontend)
        self.stats = Stats(grids)
        self.busy = BusyMeter()
        self.t = 0.0
        self.prev_end = -1.0
        self.log = FinishedLog() if keep_finished else None
        self._inbox: list[Request] = []
        self._rates: deque[tuple[float, float, float]] = deque([(0.0, 0.0, 0.0)])
        self.macro_steps = True
        self.on_answer: Callable[[list[int], float], None] | None = None
        """Called with the tickets of the /metrics requests the API server answers at `t`,
        once the metrics of that instant are in `stats` (the twin renders their pages)."""

    # --- the loop -------------------------------------------------------------------------------

    def advance_to(self, t_target: float) -> None:
        sched = self.sched
        while True:
            if self.t >= t_target:
                # The last step may end past the target; the API server only gets as far as
                # the target, so nothing reaches the metrics before its time.
                self._sync(t_target)
                return
            self._sync(self.t)
            if sched.running or sched.waiting:
                if not self._step(t_target):
                    self._idle_until(t_target)
                continue
            self._idle_until(t_target)

    def _idle_until(self, t_target: float) -> None:
        nxt = min(self.clients.next_time, self.fe.next_time())
        if nxt <= self.t:
            nxt = math.nextafter(self.t, math.inf)
        self.t = min(nxt, t_target)

    def _sync(self, t: float) -> None:
        """Process every client send, API-server cycle and hand-over due by `t`, in time order.

        Ties go hand-over first (it may answer a client, who sends again at once), then client
        sends, then the cycle that starts at that instant, so a cycle sees everything that
        arrived by its start. `t` never exceeds the engine clock, so whatever the engine is
        handed is already due.
        """
        clients = self.clients
        fe = self.fe
        deliveries = fe.deliveries
        inbox = self._inbox
        while True:
            t_deliver = deliveries[0].t if deliveries else math.inf
            t_send = clients.next_time
            t_cycle = fe.next_cycle_start()
            if t_deliver <= t_send and t_deliver <= t_cycle:
                if t_deliver > t:
                    return
                self._deliver(deliveries.popleft())
            elif t_send <= t_cycle:
                if t_send > t:
                    return
                clients.pop_due(t_send, inbox)
                for r in inbox:
                    fe.submit(r)
                inbox.clear()
            else:
                if t_cycle > t:
                    return
                fe.run_cycle()

    # --- one step -------------------------------------------------------------------------------

    def _step(self, t_target: float) -> bool:
        sched = self.sched
        plan = sched.schedule()
        if not plan.reqs:
            # Everything preempted: the next schedule() re-admits. Nothing preempted and
            # nothing scheduled cannot happen with valid knobs: wait for events.
            return bool(plan.preempted)
        t0 = self.t
        for r in plan.admitted:
            if r.scheduled_ts < 0:
                r.scheduled_ts = t0
        kernel, host = self.cost.step(
            plan.total_tokens, plan.context_tokens, plan.attn_pairs, len(plan.reqs), plan.samples
        )
        t1 = t0 + host + kernel
        self.busy.add(t0 + host, t1)
        if (
            self.macro_steps
            and not plan.admitted
            and not plan.preempted
            and plan.samples == len(plan.reqs) == plan.total_tokens == len(sched.running)
            and self._decode_run(t1)
        ):
            return True
        cost = self.cost
        res = sched.complete(t1, self.prev_end)
        rec = StepRecord(t1)
        rec.flops = cost.last_flops
        rec.read_bytes = cost.last_read_bytes
        rec.write_bytes = cost.last_write_bytes
        rec.prompt_done = res.prompt_tokens_done
        rec.generated = res.generated
        if res.generated:
            rec.iter_value = res.prompt_tokens_done + res.generated
            rec.iter_count = 1
        itl: list[tuple[float, float]] = []
        if res.itl_same:
            itl.append((t1 - self.prev_end, res.itl_same))
        for v in res.itl_other:
            itl.append((v, 1))
        rec.itl = itl
        rec.preemptions = len(plan.preempted)
        if res.first_tokens:
            rec.first_tokens = list(res.first_tokens)
        if res.finished:
            rec.finished = list(res.finished)
        self._snapshot(rec)
        self.fe.push(rec)
        self.prev_end = t1
        self.t = t1
        return True

    def _decode_run(self, t1: float) -> bool:
        """Take k >= 2 identical all-decode steps at once when nothing else can happen.

        Called after `schedule()` produced a pure decode step (every running request gets one
        token; nothing admitted or preempted) that ends at `t1`. The run stops before the step
        in which a request would finish, before the KV pool could run short, and before the
        next arrival, API-server hand-over or grid line. A queue head that could not be
        admitted now cannot be admitted during the run either (free blocks only shrink and
        the running set is fixed), so its prefix-cache lookup, which the scheduler repeats for
        the head every step, is repeated k times in the counters.
        """
        sched = self.sched
        plan = sched.plan
        reqs = plan.reqs
        n = len(reqs)
        bs = sched.config.block_size
        k_max = MAX_RUN
        for r in reqs:
            left = r.output_len - r.num_output - 1
            k_max = min(k_max, left)
            if r.first_token_ts < 0:
                return False
        if k_max < 2:
            return False
        # Runs end on a fixed grid, not at `t_target`, so chunking advance_to() changes nothing.
        grid = (math.floor(t1 / RUN_GRID_S) + 1) * RUN_GRID_S
        horizon = min(self.clients.next_time, self.fe.next_engine_event(), grid)
        if t1 >= horizon:
            return False
        cost = self.cost
        ctx = plan.context_tokens
        pairs = plan.attn_pairs
        ends = [t1]
        kernel_starts = [t1]
        work = [cost.last_flops, cost.last_read_bytes, cost.last_write_bytes]
        t = t1
        for j in range(1, k_max):
            kernel, host = cost.step(n, ctx + j * n, pairs + j * n, n, n)
            t_next = t + host + kernel
            if t_next > horizon:
                break
            kernel_starts.append(t + host)
            ends.append(t_next)
            work[0] += cost.last_flops
            work[1] += cost.last_read_bytes
            work[2] += cost.last_write_bytes
            t = t_next
        k = len(ends)
        if k < 2:
            return False
        need = 0
        for r in reqs:
            need += (r.num_computed + k + bs - 1) // bs - r.private_blocks - r.shared_blocks
        pool = sched.pool
        if need > pool.free:
            return False
        # Commit: step 1 was priced (and its blocks allocated by schedule()); add the rest.
        busy = self.busy
        for j in range(1, k):
            busy.add(kernel_starts[j], ends[j])
        itl: list[tuple[float, float]] = []
        prev_end = self.prev_end
        same = 0
        for r in reqs:
            if r.last_token_ts == prev_end:
                same += 1
            else:
                itl.append((t1 - r.last_token_ts, 1))
            c = r.num_computed + k
            r.num_computed = c
            r.num_output += k
            extra = (c + bs - 1) // bs - r.private_blocks - r.shared_blocks
            if extra > 0:
                pool.allocate(extra)
                r.private_blocks += extra
            r.last_token_ts = ends[-1]
        if same:
            itl.append((t1 - prev_end, same))
        prev = t1
        for t_next in ends[1:]:
            itl.append((t_next - prev, n))
            prev = t_next
        rec = StepRecord(ends[-1])
        rec.flops, rec.read_bytes, rec.write_bytes = work
        rec.steps = k
        rec.generated = n * k
        rec.iter_value = float(n)
        rec.iter_count = k
        rec.itl = itl
        if plan.head_queries:
            sched.prefix_queries += plan.head_queries * (k - 1)
            sched.prefix_hits += plan.head_hits * (k - 1)
            sched.prefix_requests += k - 1
        self._snapshot(rec)
        self.fe.push(rec)
        self.prev_end = ends[-1]
        self.t = ends[-1]
        return True

    def _snapshot(self, rec: StepRecord) -> None:
        sched = self.sched
        rec.running = len(sched.running)
        rec.waiting = len(sched.waiting)
        rec.kv_usage = sched.pool.usage
        rec.prefix_queries = sched.prefix_queries
        rec.prefix_hits = sched.prefix_hits
        rec.prefix_requests = sched.prefix_requests
        sched.prefix_queries = 0
        sched.prefix_hits = 0
        sched.prefix_requests = 0

    # --- the API server turns outputs into metrics and answers ----------------------------------

    def _deliver(self, delivery: object) -> None:
        from vtop.sim.frontend import Delivery

        assert isinstance(delivery, Delivery)
        td = delivery.t
        for r in delivery.requests:
            self.sched.add(r, td)
        st = self.stats
        hists = st.hists
        for rec in delivery.records:
            st.steps += rec.steps
            st.prompt_tokens += rec.prompt_done
            st.generation_tokens += rec.generated
            st.preemptions += rec.preemptions
            st.prefix_queries += rec.prefix_queries
            st.prefix_hits += rec.prefix_hits
            st.prefix_requests += rec.prefix_requests
            st.perf_flops += rec.flops
            st.perf_read_bytes += rec.read_bytes
            st.perf_write_bytes += rec.write_bytes
            if rec.iter_count:
                hists["iter_tokens"].observe(rec.iter_value, rec.iter_count)
            if rec.itl:
                itl = hists["itl"]
                for v, w in rec.itl:
                    itl.observe(v, w)
            if rec.first_tokens:
                ttft = hists["ttft"]
                for r in rec.first_tokens:
                    ttft.observe(td - r.arrival_ts)
                    st.prompt_tokens_cached += max(0, r.num_cached_tokens)
            if rec.finished:
                self._finish(rec.finished, td)
            st.running = rec.running
            st.waiting = rec.waiting
            st.kv_usage = rec.kv_usage
        if delivery.records:
            last = self._rates[-1]
            if td - last[0] >= 0.5:
                self._rates.append((td, st.prompt_tokens, st.generation_tokens))
                while len(self._rates) > 2 and self._rates[1][0] < td - RATE_WINDOW_S:
                    self._rates.popleft()
        if delivery.scrapes and self.on_answer is not None:
            self.on_answer(delivery.scrapes, td)

    def _finish(self, finished: list[Request], td: float) -> None:
        st = self.stats
        h = st.hists
        log = self.log
        for r in finished:
            e2e = td - r.arrival_ts
            queue = r.scheduled_ts - r.queued_ts
            prefill = r.first_token_ts - r.scheduled_ts
            decode = r.last_token_ts - r.first_token_ts
            h["e2e"].observe(e2e)
            h["queue"].observe(queue)
            h["prefill"].observe(prefill)
            h["decode"].observe(decode)
            h["inference"].observe(r.last_token_ts - r.scheduled_ts)
            if r.num_output > 1:
                h["req_tpot"].observe(decode / (r.num_output - 1))
            h["prompt_len"].observe(r.prompt_len)
            h["gen_len"].observe(r.num_output)
            h["max_gen"].observe(r.max_tokens)
            h["n"].observe(1)
            h["max_tokens"].observe(r.max_tokens)
            h["prefill_kv_computed"].observe(r.prompt_len - max(0, r.num_cached_tokens))
            h["num_preemptions"].observe(r.num_preemptions)
            st.http_request(
                COMPLETIONS,
                "POST",
                HTTP_REQUEST_BYTES + 4 * r.prompt_len,
                HTTP_RESPONSE_BYTES + 4 * r.num_output,
                e2e,
            )
            st.request_success[r.finish_reason] = st.request_success.get(r.finish_reason, 0) + 1
            self.fe.in_flight -= 1
            self.clients.on_done(r, td)
            if log is not None:
                log.rows.append(
                    (
                        r.tag,
                        td,
                        r.first_token_ts - r.arrival_ts,
                        e2e,
                        queue,
                        r.prompt_len,
                        r.num_preemptions,
                    )
                )

    # --- readings -------------------------------------------------------------------------------

    def throughput(self) -> tuple[float, float]:
        """(prompt, generation) tokens/s over V0's 5 s local interval."""
        rates = self._rates
        first = rates[0]
        last = rates[-1]
        dt = last[0] - first[0]
        if dt <= 0:
            return 0.0, 0.0
        return (last[1] - first[1]) / dt, (last[2] - first[2]) / dt
