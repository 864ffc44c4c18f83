"""The API server in front of the engine: a CPU-bound stage with its own capacity.

vLLM's OpenAI server is one asyncio process: it parses and tokenises incoming requests, hands
them to the engine core, and turns the engine's per-step outputs into detokenised streams,
metrics observations and finished responses. It also answers /metrics. All of that shares one
event loop, so when the process is CPU-starved (a tiny model that the engine runs faster than
Python can stream, or a rented box with one or two slow vCPUs) three things happen, as seen on
the real vLLM CPU server (reference/vllm.md):

- requests reach the engine in bursts, after each long pass of the event loop;
- the engine finishes a burst quickly and idles with running = waiting = 0, while clients still
  have requests in flight (they sit in the API server);
- /metrics answers late, by up to one pass of the loop.

The twin models the event loop as cycles: a cycle starts when the loop is free and work is
pending, takes everything that arrived by then (new requests, engine step outputs, /metrics
scrapes), costs `per_request_s` + tokens x `per_*_token_s` ... CPU seconds, and only at its end
are the new requests handed to the engine and the outputs turned into metrics and answers. With
the default costs a cycle is far shorter than an engine step and the stage is invisible.

Metrics are recorded here, as vLLM records them in the API process: TTFT and e2e latency are
measured when the API server processes the output; queue, prefill, decode and inter-token
times come from the engine core's own timestamps (`IterationStats.update_from_output`,
`update_from_finished_request` in `vllm/v1/metrics/stats.py`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from vtop.sim.scheduler import Request


@dataclass(frozen=True, slots=True)
class FrontendSpec:
    """CPU seconds the API server spends per unit of work (divided by `api_server_count`)."""

    per_request_s: float = 0.0008
    per_prompt_token_s: float = 1.0e-7
    per_output_token_s: float = 4.0e-6
    per_finished_s: float = 0.0002
    per_scrape_s: float = 0.002
    api_server_count: int = 1


class StepRecord:
    """One engine step's outputs (or `steps` identical decode steps), as sent to the API."""

    __slots__ = (
        "finished",
        "first_tokens",
        "flops",
        "generated",
        "iter_count",
        "iter_value",
        "itl",
        "kv_usage",
        "preemptions",
        "prefix_hits",
        "prefix_queries",
        "prefix_requests",
        "prompt_done",
        "read_bytes",
        "running",
        "steps",
        "t",
        "waiting",
        "write_bytes",
    )

    def __init__(self, t: float) -> None:
        self.t = t
        self.steps = 1
        self.prompt_done = 0
        self.generated = 0
        self.iter_value = 0.0
        self.iter_count = 0
        self.itl: list[tuple[float, float]] | None = None
        """Inter-token latencies as (seconds, how many tokens saw it)."""
        self.preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.prefix_requests = 0
        self.first_tokens: list[Request] | None = None
        self.finished: list[Request] | None = None
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.flops = 0.0
        self.read_bytes = 0.0
        self.write_bytes = 0.0


class Delivery:
    """What one event-loop cycle hands on at its end `t`: requests for the engine, outputs
    turned into metrics, and then the answers to the /metrics requests it took (`scrapes`,
    their tickets), which read the metrics as they stand at that instant."""

    __slots__ = ("records", "requests", "scrapes", "t")

    def __init__(
        self,
        t: float,
        requests: list[Request],
        records: list[StepRecord],
        scrapes: list[int] | None = None,
    ) -> None:
        self.t = t
        self.requests = requests
        self.records = records
        self.scrapes = scrapes


class Frontend:
    """The API server's event loop as a sequence of cycles (see the module docstring)."""

    def __init__(self, spec: FrontendSpec) -> None:
        self.spec = spec
        scale = 1.0 / max(1, spec.api_server_count)
        self._req_s = spec.per_request_s * scale
        self._ptok_s = spec.per_prompt_token_s * scale
        self._otok_s = spec.per_output_token_s * scale
        self._fin_s = spec.per_finished_s * scale
        self._scrape_s = spec.per_scrape_s * scale
        self.inbound: deque[Request] = deque()
        self.outputs: deque[StepRecord] = deque()
        self.scrapes: deque[tuple[float, int | None]] = deque()
        """Pending /metrics requests: (arrival, ticket; None for one nobody waits on)."""
        self.answer_at: dict[int, float] = {}
        """When the loop answers a ticketed scrape, known once the cycle that takes it began."""
        self.deliveries: deque[Delivery] = deque()
        self.busy_until = 0.0
        self.busy_total = 0.0
        self.in_flight = 0
        """Requests received from clients and not yet answered (API server + engine)."""

    def submit(self, req: Request) -> None:
        """A client sent `req` at `req.arrival_ts` (calls must come in send order)."""
        self.inbound.append(req)
        self.in_flight += 1

    def push(self, record: StepRecord) -> None:
        self.outputs.append(record)

    def scrape(self, t: float, ticket: int | None = None) -> float:
        """Register a /metrics request at `t`; return the earliest time the loop can answer it.

        That is a lower bound, not the answer: the cycle that takes the scrape also takes the
        requests and engine outputs that arrive until it starts, which are not known yet.
        Whoever needs the page waits for the cycle itself (`answer_at`, a `Delivery`)."""
        self.scrapes.append((t, ticket))
        return self.earliest_answer(t)

    def earliest_answer(self, t: float) -> float:
        """Lower bound on when a scrape registered at `t` is answered (see `scrape`)."""
        start = max(t, self.busy_until)
        return start + self._cost_until(start)

    def _cost_until(self, t: float) -> float:
        cost = 0.0
        for r in self.inbound:
            if r.arrival_ts > t:
                break
            cost += self._req_s + self._ptok_s * r.prompt_len
        for rec in self.outputs:
            if rec.t > t:
                break
            cost += self._otok_s * rec.generated
            if rec.finished:
                cost += self._fin_s * len(rec.finished)
        for s, _ in self.scrapes:
            if s > t:
                break
            cost += self._scrape_s
        return cost

    def _earliest_pending(self) -> float:
        t = math.inf
        if self.inbound:
            t = self.inbound[0].arrival_ts
        if self.outputs and self.outputs[0].t < t:
            t = self.outputs[0].t
        if self.scrapes and self.scrapes[0][0] < t:
            t = self.scrapes[0][0]
        return t

    def next_time(self) -> float:
        """When the next cycle could start or the next delivery is due (inf: nothing)."""
        nxt = self.next_cycle_start()
        if self.deliveries and self.deliveries[0].t < nxt:
            nxt = self.deliveries[0].t
        return nxt

    def next_engine_event(self) -> float:
        """Earliest time the API server may hand the engine a request or a client an answer.

        Cycles that only stream decode tokens change neither the engine nor the clients, so
        a steady decode run may proceed past them.
        """
        t = math.inf
        for d in self.deliveries:
            if d.requests or any(rec.finished for rec in d.records):
                t = d.t
                break
        if self.inbound:
            t = min(t, max(self.busy_until, self.inbound[0].arrival_ts))
        for rec in self.outputs:
            if rec.finished:
                t = min(t, max(self.busy_until, rec.t))
                break
        return t

    def next_cycle_start(self) -> float:
        """When the next event-loop cycle can start (inf: no work pending)."""
        if not (self.inbound or self.outputs or self.scrapes):
            return math.inf
        return max(self.busy_until, self._earliest_pending())

    def run_cycle(self) -> None:
        """Run the cycle that starts at `next_cycle_start()`: take everything that arrived by
        then, spend its CPU cost, and queue the hand-over for the cycle's end."""
        start = self.next_cycle_start()
        inbound = self.inbound
        outputs = self.outputs
        scrapes = self.scrapes
        cost = 0.0
        reqs: list[Request] = []
        while inbound and inbound[0].arrival_ts <= start:
            r = inbound.popleft()
            cost += self._req_s + self._ptok_s * r.prompt_len
            reqs.append(r)
        recs: list[StepRecord] = []
        while outputs and outputs[0].t <= start:
            rec = outputs.popleft()
            cost += self._otok_s * rec.generated
            if rec.finished:
                cost += self._fin_s * len(rec.finished)
            recs.append(rec)
        tickets: list[int] | None = None
        while scrapes and scrapes[0][0] <= start:
            ticket = scrapes.popleft()[1]
            cost += self._scrape_s
            if ticket is not None:
                if tickets is None:
                    tickets = []
                tickets.append(ticket)
        end = start + cost
        self.busy_until = end
        self.busy_total += cost
        if tickets:
            for ticket in tickets:
                self.answer_at[ticket] = end
        if reqs or recs or tickets:
            self.deliveries.append(Delivery(end, reqs, recs, tickets))
